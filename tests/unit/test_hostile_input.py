"""The hostile-input table (``tests/hostile.py``) through in-process writes and creates, and
damaged tables: each refusal is the error the table names, with its words, and leaves
nothing behind; each accepted input reads back."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import (
    DynBucketError,
    ForeignFileGroupError,
    FormatError,
    InstantNotFoundError,
    InvalidInputError,
    NotATableError,
    SchemaMismatchError,
    TableCorruptedError,
    TableExistsError,
)
from dynbucket.format.table.options import TableOptions
from dynbucket.options import (
    ConsistentHashingIndex,
    DynamicBucketIndex,
    SimpleBucketIndex,
)
from dynbucket.table import Table
from tests.hostile import (
    CREATE_CASES,
    INPUT_CASES,
    KEY,
    ORDERING,
    PARTITION,
    SCHEMA,
    CreateCase,
    InputCase,
)
from tests.hostile import write as write_case
from tests.hudi_readers import hudi_read


def files(root: Path) -> list[str]:
    return sorted(
        str(p) for p in root.rglob("*") if p.is_file() and not p.name.startswith("writer.lease")
    )


def folders(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_dir())


@pytest.mark.parametrize("case", INPUT_CASES, ids=[c.name for c in INPUT_CASES])
def test_input(tmp_path: Path, case: InputCase) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, KEY, PARTITION, ORDERING)
    t.upsert(
        pa.table(
            {"id": ["old"], "day": ["d0"], "ts": [0], "qty": [1], "note": ["n"]}, schema=SCHEMA
        )
    )
    before, dirs = files(tmp_path), folders(tmp_path)
    if case.error is None:
        write_case(t, case.operation, case.data())
        live = t.to_arrow(meta_columns=False).filter(
            pa.compute.not_equal(pa.compute.field("id"), "old")
        )
        assert live.num_rows == case.rows
        return
    with pytest.raises(case.error) as raised:
        write_case(t, case.operation, case.data())
    assert type(raised.value) is case.error
    assert re.search(case.message, str(raised.value)), str(raised.value)
    assert files(tmp_path) == before and folders(tmp_path) == dirs  # nothing written
    assert len(t.history()) == 1


@pytest.mark.parametrize("case", CREATE_CASES, ids=[c.name for c in CREATE_CASES])
def test_create(tmp_path: Path, case: CreateCase) -> None:
    kwargs = {
        "record_key": KEY,
        "partition_by": PARTITION,
        "ordering_field": ORDERING,
        **case.kwargs,
    }
    if case.error is None:
        t = Table.create(str(tmp_path / "t"), case.schema, **kwargs)
        assert Table.open(t.uri)._spec == t._spec
        return
    with pytest.raises(case.error) as raised:
        Table.create(str(tmp_path / "t"), case.schema, **kwargs)
    assert type(raised.value) is case.error
    assert re.search(case.message, str(raised.value)), str(raised.value)
    assert files(tmp_path) == []


# --- places that are not tables, and damaged tables ---------------------------------------


def _table(tmp_path: Path, table_type: str = "MERGE_ON_READ") -> Table:
    from dynbucket.options import TableOptions

    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        KEY,
        PARTITION,
        ORDERING,
        options=TableOptions(table_type=table_type),
    )
    for ts in (1, 2):
        t.upsert(
            pa.table(
                {
                    "id": ["a", "b"],
                    "day": ["d1", "d1"],
                    "ts": [ts, ts],
                    "qty": [1, 2],
                    "note": ["x", "y"],
                },
                schema=SCHEMA,
            )
        )
    return t


def _completed_file(t: Table) -> Path:
    return sorted((Path(t.uri) / ".hoodie").glob("*.deltacommit"))[-1]


def _log(t: Table) -> Path:
    return next(Path(t.uri).rglob(".*.log.*"))


def _base(t: Table) -> Path:
    return next(p for p in Path(t.uri).glob("day=d1/*.parquet"))


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


DAMAGE = [
    # (case, damage done to a table with two commits, read, error, message)
    (
        "an empty completed instant file",
        lambda t: _completed_file(t).write_bytes(b""),
        "read",
        TableCorruptedError,
        r"\.deltacommit: the metadata of completed instant \d+ is "
        "empty; restore the file",
    ),
    (
        "a completed instant file cut short",
        lambda t: _truncate(_completed_file(t)),
        "read",
        TableCorruptedError,
        "is not a complete JSON document",
    ),
    (
        "a missing base file",
        lambda t: _base(t).unlink(),
        "read",
        TableCorruptedError,
        "a data file of completed instant .* is missing; restore it",
    ),
    (
        "a missing log file",
        lambda t: _log(t).unlink(),
        "read",
        TableCorruptedError,
        "is missing; restore it",
    ),
    (
        "a log file cut short",
        lambda t: _truncate(_log(t)),
        "read",
        FormatError,  # a TableCorruptedError
        r"damaged log file .*restore it from a backup, or roll back the instant",
    ),
    (
        "a base file cut short",
        lambda t: _truncate(_base(t)),
        "read",
        TableCorruptedError,
        "unreadable data file",
    ),
    (
        "hoodie.properties removed",
        lambda t: (Path(t.uri) / ".hoodie/hoodie.properties").unlink(),
        "open",
        TableCorruptedError,
        "hoodie.properties is missing",
    ),
    (
        "table.json garbled",
        lambda t: (Path(t.uri) / ".hoodie/.dynbucket/table.json").write_text("{not json"),
        "open",
        TableCorruptedError,
        "unreadable table properties",
    ),
    (
        "time travel to an instant that never was",
        lambda t: None,
        "as_of 19990101000000000",
        InstantNotFoundError,
        "no completed instant 19990101000000000",
    ),
]


@pytest.mark.parametrize(
    ("case", "damage", "read", "error", "message"), DAMAGE, ids=[d[0] for d in DAMAGE]
)
def test_damaged_table(
    tmp_path: Path, case: str, damage, read: str, error: type, message: str
) -> None:
    t = _table(tmp_path)
    damage(t)
    with pytest.raises(error) as raised:
        if read == "open":
            Table.open(t.uri)
        elif read.startswith("as_of "):
            t.to_arrow(as_of=read.split()[1])
        else:
            Table.open(t.uri).to_arrow()
    assert type(raised.value) is error
    assert re.search(message, str(raised.value)), str(raised.value)


def test_places_that_are_not_tables(tmp_path: Path) -> None:
    a_file = tmp_path / "data.csv"
    a_file.write_text("id\n1\n")
    with pytest.raises(TableExistsError, match="is a file, not a folder"):
        Table.create(str(a_file), SCHEMA, KEY)
    with pytest.raises(NotATableError, match="not a dynbucket table"):
        Table.open(str(a_file))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotATableError, match="not a dynbucket table"):
        Table.open(str(tmp_path / "empty"))
    with pytest.raises(DynBucketError):
        Table.open(str(tmp_path / "nowhere"))
    assert a_file.read_text() == "id\n1\n"


#: Two different composite keys whose Hudi record keys are one text: "k1:x,k2:y,k2:z".
COLLIDING = pa.table({"k1": ["x,k2:y", "x"], "k2": ["z", "y,k2:z"], "day": ["d", "d"], "v": [1, 2]})
COMPOSITE = pa.schema(
    [("k1", pa.string()), ("k2", pa.string()), ("day", pa.string()), ("v", pa.int64())]
)
KEY_MESSAGE = (
    r"record key field 'k1' has the value 'x,k2:y' \(row 0\), which holds ','.*"
    r"'k1:…,k2:…'.*use key values without ','.*Nothing was written"
)


@pytest.mark.parametrize(
    "index",
    [
        DynamicBucketIndex(max_keys_per_bucket=2),
        SimpleBucketIndex(num_buckets=2),
        ConsistentHashingIndex(initial_buckets=2),
    ],
    ids=["dynamic", "simple", "consistent"],
)
def test_composite_keys_whose_record_key_texts_collide_are_refused(
    tmp_path: Path, index: Any
) -> None:
    t = Table.create(str(tmp_path / "t"), COMPOSITE, ["k1", "k2"], "day", index=index)
    t.upsert(pa.table({"k1": ["a:b"], "k2": ["c"], "day": ["d"], "v": [0]}))  # ':' alone is fine
    before, dirs = files(tmp_path), folders(tmp_path)
    for write in (t.upsert, t.insert, t.delete):
        with pytest.raises(InvalidInputError, match=KEY_MESSAGE):
            write(COLLIDING if write != t.delete else COLLIDING.select(["k1", "k2", "day"]))
    with pytest.raises(InvalidInputError, match=r"record key field 'k2' has the value 'y,k2:z'"):
        t.upsert(COLLIDING.slice(1))
    assert files(tmp_path) == before and folders(tmp_path) == dirs
    assert len(t.history()) == 1


FLOAT_ORDERED = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("o", pa.float64()), ("v", pa.int64())]
)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_signed_zero_orders_as_hudi_orders_and_nan_is_refused(
    tmp_path: Path, table_type: str
) -> None:
    """Java's compareTo, which Hudi's merge uses, puts -0.0 below 0.0: an update of 0.0 by
    -0.0 loses, of -0.0 by 0.0 wins, within a batch too; hudi-rs reads the same."""
    t = Table.create(
        str(tmp_path / "t"),
        FLOAT_ORDERED,
        "id",
        "day",
        "o",
        options=TableOptions(table_type=table_type),
    )

    def rows(ids: list[str], o: list[float], v: list[int]) -> pa.Table:
        return pa.table({"id": ids, "day": ["d"] * len(ids), "o": o, "v": v}, FLOAT_ORDERED)

    t.upsert(rows(["a", "c", "z"], [1.0, 0.0, -0.0], [1, 1, 1]))
    # c: 0.0 then -0.0 (loses); z: -0.0 then 0.0 (wins); n: 0.0 and -0.0 in one batch.
    r = t.upsert(rows(["a", "c", "z", "n", "n"], [2.0, -0.0, 0.0, 0.0, -0.0], [2, 2, 2, 2, 3]))
    assert (r.keys_updated, r.keys_stale, r.keys_inserted) == (2, 1, 1)
    ours = {row["id"]: row["v"] for row in t.to_arrow().to_pylist()}
    assert ours == {"a": 2, "c": 1, "z": 2, "n": 2}
    assert {row["id"]: row["v"] for row in hudi_read(t.uri).to_pylist()} == ours
    before = files(tmp_path)
    with pytest.raises(
        InvalidInputError,
        match=r"ordering field 'o' is NaN in 1 row\(s\) "
        r"\(first at row 1\).*give a number\. Nothing was written",
    ):
        t.upsert(rows(["a", "c"], [3.0, float("nan")], [3, 3]))
    assert files(tmp_path) == before


@pytest.mark.parametrize("operation", ["upsert", "delete"])
def test_a_field_named_twice_is_refused_by_name(tmp_path: Path, operation: str) -> None:
    """Two columns of one name (a join's leftover) were a raw KeyError; which of them is
    the field would be a guess."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, KEY, PARTITION, ORDERING)
    before, dirs = files(tmp_path), folders(tmp_path)
    good = pa.table({"id": ["a"], "day": ["d"], "ts": [1], "qty": [1], "note": ["n"]})
    data = good.append_column("ts", pa.array([2]))
    with pytest.raises(SchemaMismatchError, match=r"field\(s\) \['ts'\] appear more than once"):
        getattr(t, operation)(data)
    assert files(tmp_path) == before and folders(tmp_path) == dirs


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_file_group_dynbucket_did_not_write_is_named(tmp_path: Path, table_type: str) -> None:
    """A base file under a UUID file id (as Hudi's own writers name groups, or a stray copy)
    ended every read in a raw ``ValueError``: reads, writes and ``check`` name the file and
    say what to do, and nothing is written."""
    t = _table(tmp_path, table_type)
    base = _base(t)
    stray = base.with_name(
        "de480479-1111-2222-3333-444455556666" + base.name[base.name.index("_") :]
    )
    stray.write_bytes(base.read_bytes())
    before = files(tmp_path)
    for attempt in (
        lambda: Table.open(t.uri).to_arrow(),
        lambda: Table.open(t.uri).upsert(
            pa.table(
                {"id": ["z"], "day": ["d1"], "ts": [9], "qty": [1], "note": ["n"]}, schema=SCHEMA
            )
        ),
    ):
        with pytest.raises(ForeignFileGroupError, match=r"de480479-.*adopt the table again"):
            attempt()
    assert files(tmp_path) == before
    report = Table.open(t.uri).check()
    assert not report.healthy and stray.name in str(report)


def _instant_files(uri: str) -> list[str]:
    return sorted(p.name for p in (Path(uri) / ".hoodie").iterdir() if p.name[:1].isdigit())


def test_field_names_differing_only_in_case_are_refused_by_name(tmp_path: Path) -> None:
    from dynbucket.base.errors import ConfigError, SchemaMismatchError

    cased = pa.schema([("id", pa.string()), ("ID", pa.string())])
    with pytest.raises(ConfigError, match=r"fields \['ID', 'id'\] differ only in case"):
        Table.create(str(tmp_path / "c"), cased, "id")
    assert not (tmp_path / "c" / ".hoodie").exists()
    schema = pa.schema([("id", pa.string()), ("v", pa.int64())])
    uri = str(tmp_path / "t")
    with Table.create(uri, schema, "id") as t:
        t.upsert(pa.table({"id": ["a"], "v": [1]}))
        before = _instant_files(uri)
        with pytest.raises(SchemaMismatchError, match=r"\['V', 'v'\] differ only in case"):
            t.upsert(pa.table({"id": ["b"], "v": [2], "V": [3]}))  # in the records
        with pytest.raises(SchemaMismatchError, match=r"\[.V., .v.\] differ only in case"):
            t.upsert(  # a new field whose name is an old one's in other case
                pa.table({"id": ["b"], "V": [3]}), partial=True
            )
        assert _instant_files(uri) == before
        assert t.schema == schema


def test_delete_refuses_records_marked_as_not_deletes(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("v", pa.int64())])
    uri = str(tmp_path / "t")
    with Table.create(uri, schema, "id") as t:
        t.upsert(pa.table({"id": ["a", "b", "c"], "v": [1, 2, 3]}))
        before = _instant_files(uri)
        keys = pa.table({"id": ["a", "b"], "_hoodie_is_deleted": [True, False]})
        with pytest.raises(InvalidInputError, match=r"1 record\(s\) are marked as not deletes"):
            t.delete(keys)
        assert _instant_files(uri) == before
        t.delete(pa.table({"id": ["a"], "_hoodie_is_deleted": [True]}))
        assert sorted(t.to_arrow().column("id").to_pylist()) == ["b", "c"]
