"""An operation is decided once and says what follows from it; a write context ships to
another process without its open store."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.table import Table


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
    with pytest.raises(
        InvalidInputError,
        match=r"operation='merge': must be one of "
        r"\('upsert', 'insert', 'delete'\)",
    ):
        Operation.of("merge")


def test_a_table_ref_ships_without_its_open_store(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.string())]), "id")
    ref = TableRef.of(t._store, t._spec)
    assert ref.store is t._store  # the driver's own store, not opened again
    ctx = WriteContext(ref, "20260101000000000", frozenset(), Operation.INSERT)
    shipped = pickle.loads(pickle.dumps(ctx))
    assert shipped == ctx and "_opened" not in pickle.dumps(ctx).decode("latin-1")
    assert shipped.store is not t._store and shipped.store.uri == t._store.uri
    assert not shipped.files_refuse_known  # the dynamic scheme's assigners refuse them
