"""What a write does, decided once: the operation and what follows from it.

Each engine and scheme asks the operation, instead of comparing strings: whether its rows
are deletes (keys only, no ordering value), whether known keys are refused (an insert), and
which assigner call tags its rows (``locate`` finds buckets without assigning new ones).
"""

from __future__ import annotations

import enum

from dynbucket.base.errors import InvalidInputError


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
