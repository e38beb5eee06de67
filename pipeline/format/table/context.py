"""What one write instant is, decided once, as every part of it needs to know it.

:class:`Operation`: each engine and scheme asks the operation instead of comparing strings:
whether its rows are deletes (keys only, no ordering value), whether known keys are refused
(an insert), and which assigner call tags its rows (``locate`` finds buckets without
assigning new ones).

:class:`TableRef` and :class:`WriteContext`: a table, and a write of it, as another process
(a Spark task, a slot actor) receives them: frozen and picklable, the storage opened on
first use in each process (pyarrow's filesystems pickle; an open store does not need to).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import remember_layout


class Operation(enum.Enum):
    UPSERT = "upsert"
    INSERT = "insert"
    DELETE = "delete"

    @classmethod
    def of(cls, value: str | Operation) -> Operation:
        """The operation named ``value``.

        Raises:
            InvalidInputError: no such operation.
        """
        if isinstance(value, Operation):
            return value
        try:
            return cls(value)
        except ValueError:
            names = tuple(o.value for o in cls)
            raise InvalidInputError(f"operation={value!r}: must be one of {names}") from None

    @property
    def deletes(self) -> bool:
        """Its rows are keys to delete (no ordering value, unknown keys counted)."""
        return self is Operation.DELETE

    @property
    def refuses_known(self) -> bool:
        """A key the table already has fails the write (nothing is written)."""
        return self is Operation.INSERT

    @property
    def assigner_call(self) -> str:
        """The assigner's method that tags its rows: deletes assign no new buckets."""
        return "locate" if self.deletes else "assign"


@dataclass(frozen=True)
class TableRef:
    """A table as another process opens it: its location and definition."""

    uri: str
    filesystem: pafs.FileSystem | None
    spec: TableSpec
    _opened: dict[str, TableStore] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @classmethod
    def of(cls, store: TableStore, spec: TableSpec) -> TableRef:
        ref = cls(store.uri, store.fs, spec)
        ref._opened["store"] = store
        return ref

    @property
    def store(self) -> TableStore:
        """The table's storage, opened once per process."""
        if "store" not in self._opened:
            store = TableStore.at(self.uri, self.filesystem)
            # The definition handed over says the layout: a long-lived worker may have
            # cached another table's that was at this path before.
            remember_layout(store, 2 if self.spec.table_version >= 8 else 1)
            self._opened["store"] = store
        return self._opened["store"]

    def __getstate__(self) -> dict[str, object]:
        return {"uri": self.uri, "filesystem": self.filesystem, "spec": self.spec}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in {**state, "_opened": {}}.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class WriteContext:
    """One write instant as each of its parts sees it (the driver, a Spark task)."""

    table: TableRef
    instant: str
    visible: frozenset[str]
    """The completed instants the write builds on."""
    operation: Operation
    index_slots: int = 1
    """The write's assigner slot count, which groups its index files."""
    kept: tuple[str, ...] = ()
    """A partial upsert's fields its records lack: a known key keeps the table's values."""

    @property
    def spec(self) -> TableSpec:
        return self.table.spec

    @property
    def store(self) -> TableStore:
        return self.table.store

    @property
    def deletes(self) -> bool:
        return self.operation.deletes

    @property
    def files_refuse_known(self) -> bool:
        """Whether the file-group writer refuses known keys: an insert into a table of a
        stateless scheme, where no assigner knows them and each group's slice tells."""
        return self.operation.refuses_known and not self.spec.scheme.assigner_tells_new_keys
