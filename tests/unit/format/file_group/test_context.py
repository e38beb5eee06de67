"""An operation is decided once and says what follows from it."""

from __future__ import annotations

import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.file_group.context import Operation


def test_each_operation_says_what_it_does() -> None:
    facts = {op: (op.deletes, op.refuses_known, op.assigner_call) for op in Operation}
    assert facts == {
        Operation.UPSERT: (False, False, "assign"),
        Operation.INSERT: (False, True, "assign"),
        Operation.DELETE: (True, False, "locate"),
    }


def test_names_and_operations_are_taken_and_others_refused() -> None:
    assert Operation.of("insert") is Operation.INSERT
    assert Operation.of(Operation.DELETE) is Operation.DELETE
    with pytest.raises(InvalidInputError, match=r"operation='merge': must be one of "
                       r"\('upsert', 'insert', 'delete'\)"):  # fmt: skip
        Operation.of("merge")
