"""A table's bucket scheme as one object: asked what it does instead of branching on
which scheme a table has.

* :class:`DynamicBuckets` (``DynamicBucketIndex``): assigner slots give new keys
  buckets that are not full; every key's bucket is kept in the record-level index, the
  source of truth (docs/design.md). A key is unique within its partition.
* :class:`GlobalDynamicBuckets` (``DynamicBucketIndex(global_index=True)``): the same,
  a key unique in the whole table: its row moves when its partition value changes, a
  delete or a lookup needs the key alone.
* :class:`SimpleBuckets` (``SimpleBucketIndex``, Hudi's bucket index) and
  :class:`ConsistentHashing` (``ConsistentHashingIndex``): a key's bucket is a function of
  the key and its partition's layout (``layouts.py``); no assigner, no index.

Each write path (``write/schemes.py``) and each reader asks the table's scheme
(``TableSpec.scheme``) what it would otherwise branch on: where keys are unique
(``key_scope``, ``scopes``), which fields find a row (``identity``), where a lookup
looks. A new scheme is a subclass here, a line in ``SCHEMES`` and its options class.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Collection, Iterable
from typing import ClassVar

from dynbucket.base.errors import InvalidInputError
from dynbucket.base.options import (
    CONSISTENT,
    DYNAMIC,
    SIMPLE,
    ConsistentHashingIndex,
    DynamicBucketIndex,
    IndexOptions,
    SimpleBucketIndex,
)
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.storage.store import TableStore


class BucketScheme(ABC):
    """How a table's keys find their buckets."""

    name: ClassVar[str]
    """The name the scheme is persisted under (``index.engine`` of the table's
    properties)."""
    assigner_tells_new_keys: ClassVar[bool]
    """Whether a write's assigner slots say which of its keys are new (they place every
    key); else no assigner ran, and each file group's slice tells the file-group writer
    which keys it already holds (an insert refuses those)."""
    index_entries: ClassVar[bool]
    """Whether the table keeps an entry per key in the record-level index, which places
    the key (adoption writes the entries, ``check`` compares them with the rows, the
    stats count them, a version 9 table keeps Hudi's record index too); else the
    partition's layout places each key (``layouts``) and no entry is kept."""
    file_ids_numbered: ClassVar[bool]
    """Whether an adopted file group's id starts with its bucket's number (Hudi's bucket
    index names its groups so); else adoption numbers a partition's groups in order."""
    adoptable: ClassVar[bool] = True
    """Whether a table Hudi wrote can be adopted with this scheme."""
    keys_move: ClassVar[bool] = False
    """Whether a key is unique in the table rather than in its partition: a record whose
    partition value differs from its key's row moves the row (the write keeps one record
    per key across partitions and deletes the row where it was)."""
    unique_where: ClassVar[str] = (
        "in the partition the records name (a key is unique within its partition: give "
        "each key's partition value)"
    )
    """Where a key is unique, as a message says it."""

    def __init__(self, options: IndexOptions) -> None:
        self.options = options

    @classmethod
    def takes(cls, options: IndexOptions) -> bool:
        """Whether ``options`` are this scheme's (the registry asks in its order)."""
        return True

    def key_scope(self, partition: str) -> str:
        """The scope whose keys ``partition``'s keys must differ from: the partition
        itself, or ``""`` for the whole table."""
        return partition

    def scopes(self, partitions: Iterable[str]) -> list[list[str]]:
        """``partitions`` grouped by the scope their keys are unique in, each sorted."""
        by_scope: dict[str, list[str]] = {}
        for partition in sorted(partitions):
            by_scope.setdefault(self.key_scope(partition), []).append(partition)
        return list(by_scope.values())

    def identity(
        self, record_key: tuple[str, ...], partition_by: tuple[str, ...]
    ) -> tuple[str, ...]:
        """The fields that find a key's row (a delete needs these and no more)."""
        return tuple(dict.fromkeys([*record_key, *partition_by]))

    def lookup_partitions(self, named: list[str], held: Callable[[], list[str]]) -> list[str]:
        """The partitions a lookup of keys whose records name ``named`` reads
        (``held``: the partitions the index holds, asked only if needed)."""
        return named

    def refuse_partial(self) -> None:  # noqa: B027 (most schemes take partial upserts)
        """Raises InvalidInputError if a partial upsert cannot keep a known key's values."""

    def layouts(
        self, store: TableStore, key_fields: tuple[str, ...], visible: Collection[str]
    ) -> BucketLayouts | None:
        """Every partition's bucket layout as of the ``visible`` instants (None: the
        scheme has no layouts)."""
        return None

    def initial_layouts(self, key_fields: tuple[str, ...]) -> BucketLayouts | None:
        """The layouts of a table no instant has changed the layout of (an adopted one's
        files are checked against them); None: a bucket may hold any key."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"


class DynamicBuckets(BucketScheme):
    name = DYNAMIC
    assigner_tells_new_keys = True
    index_entries = True
    file_ids_numbered = False


class GlobalDynamicBuckets(DynamicBuckets):
    keys_move = True
    unique_where = "in the table"

    @classmethod
    def takes(cls, options: IndexOptions) -> bool:
        return isinstance(options, DynamicBucketIndex) and options.global_index

    def key_scope(self, partition: str) -> str:
        return ""

    def identity(
        self, record_key: tuple[str, ...], partition_by: tuple[str, ...]
    ) -> tuple[str, ...]:
        return record_key  # the key alone finds its row, wherever it is

    def lookup_partitions(self, named: list[str], held: Callable[[], list[str]]) -> list[str]:
        return held()  # the key is in one partition, whatever the value given

    def refuse_partial(self) -> None:
        raise InvalidInputError(
            "partial=True: a table with a global index (dynamic-bucket.global-index) takes "
            "whole rows only (a key moving partitions would keep no values); write whole "
            "rows, or set hoodie.write.set.null.for.missing.columns for nulls. Nothing was "
            "written."
        )


class LayoutBuckets(BucketScheme):
    """The schemes whose buckets are a function of the key and its partition's layout."""

    assigner_tells_new_keys = False
    index_entries = False
    file_ids_numbered = True

    def layouts(
        self, store: TableStore, key_fields: tuple[str, ...], visible: Collection[str]
    ) -> BucketLayouts:
        return BucketLayouts.load(store, self.options, key_fields, visible)

    def initial_layouts(self, key_fields: tuple[str, ...]) -> BucketLayouts:
        return BucketLayouts(self.options, key_fields)


class SimpleBuckets(LayoutBuckets):
    name = SIMPLE


class ConsistentHashing(LayoutBuckets):
    name = CONSISTENT
    adoptable = False  # Hudi's consistent hashing keeps its ring in its own metadata


#: The schemes of each options class, the first whose ``takes`` answers yes chosen.
SCHEMES: dict[type, tuple[type[BucketScheme], ...]] = {
    DynamicBucketIndex: (GlobalDynamicBuckets, DynamicBuckets),
    SimpleBucketIndex: (SimpleBuckets,),
    ConsistentHashingIndex: (ConsistentHashing,),
}


def scheme_of(options: IndexOptions) -> BucketScheme:
    """The scheme of a table's index options (a subclass of an options class, such as
    ``DynamicBucketIndex``, is its scheme's)."""
    for cls in type(options).__mro__:
        for scheme in SCHEMES.get(cls, ()):
            if scheme.takes(options):
                return scheme(options)
    raise TypeError(f"no bucket scheme for {type(options).__name__}")
