"""What a write puts into file groups, per table type: base files, log files with data and
delete blocks, copy-on-write rewrites, and a Hudi reader reading the result alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.format.hudi import files, log_file
from dynbucket.format.hudi.meta_fields import META_FIELDS
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads


def _table(tmp_path: Path, ordering_type: pa.DataType, **options: object) -> Table:
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", ordering_type)])
    return Table.create(
        str(tmp_path / "t"),
        schema,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=100),
        TableOptions(**options),
    )  # type: ignore[arg-type]


def _data_files(t: Table) -> list[files.ParsedName]:
    return sorted(
        (p for f in Path(t._store.root).rglob("*") if (p := files.parse(f.name)) is not None),
        key=lambda p: (p.instant, p.kind),
    )


def _write_three(t: Table) -> None:
    ts = t._spec.schema.field("ts").type
    t.upsert(
        pa.table(
            {
                "id": ["a", "b", "c"],
                "day": ["d"] * 3,
                "ts": pa.array([1, 1, 1], pa.int64()).cast(ts),
            }
        )
    )
    t.upsert(
        pa.table({"id": ["a", "e"], "day": ["d"] * 2, "ts": pa.array([2, 2], pa.int64()).cast(ts)})
    )
    t.delete(pa.table({"id": ["b"], "day": ["d"]}))


def test_merge_on_read_updates_and_deletes_go_to_log_blocks(tmp_path: Path) -> None:
    t = _table(tmp_path, pa.int64())
    _write_three(t)
    kinds = [(p.kind, p.version) for p in _data_files(t)]
    assert kinds == [("base", 0), ("log", 1), ("log", 2)]
    logs = [f for f in Path(t._store.root).rglob(".*.log.*")]
    blocks = {b.type for f in logs for b in log_file.read_blocks(f.read_bytes())}
    assert blocks == {log_file.PARQUET_DATA, log_file.DELETE}
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == ["a", "c", "e"]
    check_hudi_reads(t)


@pytest.mark.parametrize("ordering_type", [pa.float64(), pa.string(), pa.timestamp("us")])
def test_deletes_with_an_ordering_no_delete_record_can_carry_rewrite_the_base(
    tmp_path: Path, ordering_type: pa.DataType
) -> None:
    t = _table(tmp_path, ordering_type)
    _write_three(t)
    # The delete rewrote the group's base file (the slice's log folded into it).
    assert [p.kind for p in _data_files(t)] == ["base", "log", "base"]
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == ["a", "c", "e"]
    check_hudi_reads(t)


def test_copy_on_write_writes_base_files_only(tmp_path: Path) -> None:
    t = _table(tmp_path, pa.int64(), table_type="COPY_ON_WRITE")
    _write_three(t)
    assert [p.kind for p in _data_files(t)] == ["base", "base", "base"]
    newest = sorted(Path(t._store.root).rglob("*.parquet"))[-1]
    rows = pq.read_table(newest, partitioning=None).to_pylist()
    # Rows the last write did not touch keep their commit time (and seqno).
    first = _data_files(t)[0].instant
    assert {r["id"]: r["_hoodie_commit_time"] == first for r in rows} == {
        "a": False,
        "c": True,
        "e": False,
    }
    check_hudi_reads(t)


def test_without_meta_fields_files_hold_the_table_fields_only(tmp_path: Path) -> None:
    t = _table(tmp_path, pa.int64(), table_type="COPY_ON_WRITE", populate_meta_fields=False)
    _write_three(t)
    for f in Path(t._store.root).rglob("*.parquet"):
        assert not set(pq.read_schema(f).names) & set(META_FIELDS)
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == ["a", "c", "e"]
    check_hudi_reads(t)


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_an_update_losing_to_the_record_the_table_has_counts_as_stale(
    tmp_path: Path, table_type: str
) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    t = Table.create(
        str(tmp_path / "t"),
        schema,
        "id",
        ordering_field="ts",
        options=TableOptions(table_type=table_type),
    )

    def upsert(ids: list[str], ts: list[int]) -> tuple[int, int, int]:
        values = [f"{i}@{s}" for i, s in zip(ids, ts, strict=True)]
        r = t.upsert(pa.table({"id": ids, "ts": ts, "v": values}))
        return r.keys_inserted, r.keys_updated, r.keys_stale

    assert upsert(["a", "b", "c"], [5, 5, 5]) == (3, 0, 0)
    # Every ordering value above the group's largest: no record is read to know it.
    assert upsert(["a"], [6]) == (0, 1, 0)
    assert upsert(["a", "b", "c", "d"], [1, 5, 9, 1]) == (1, 2, 1)  # a: 1 < 6; b: a tie wins
    assert {r["id"]: r["ts"] for r in t.to_arrow().to_pylist()} == {"a": 6, "b": 5, "c": 9, "d": 1}
    t.delete(pa.table({"id": ["a"]}))
    # After a delete the key comes back as a new key (into the same group: it has room),
    # below the record the group's base still holds of it: Hudi's merge of a log record
    # would bring that base record back, so the group's base is rewritten (merge-on-read
    # too), and the new row shows, as it does in any other group.
    before = {r.slice.file_id: r.slice.base for r in t.snapshot().slices()}
    assert upsert(["a"], [2]) == (1, 0, 0)
    live = {r["id"]: r["ts"] for r in t.to_arrow().to_pylist()}
    assert live["a"] == 2
    after = {r.slice.file_id: r.slice.base for r in t.snapshot().slices()}
    assert after != before  # a new base, not a log
    check_hudi_reads(t)


@pytest.mark.parametrize(
    "ordering",
    [pa.int8(), pa.int16(), pa.int32(), pa.uint16(), pa.uint32(), pa.int64(), None],
    ids=["int8", "int16", "int32", "uint16", "uint32", "int64", "none"],
)
@pytest.mark.parametrize("version", [6, 9])
def test_merge_on_read_deletes_read_in_hudi_rs_whatever_the_ordering_type(
    tmp_path: Path, ordering: pa.DataType | None, version: int
) -> None:
    # Delete blocks carried the ordering value in Avro's int branch for fields narrower than
    # 64 bits (hudi-rs kept the rows) and as a string instant without an ordering field
    # (hudi-rs could not read the table).
    from tests.hudi_readers import hudi_read

    fields = [("id", pa.string()), ("v", pa.int64())] + ([("ts", ordering)] if ordering else [])
    schema = pa.schema(fields)
    options = TableOptions(table_version=version)
    with Table.create(
        str(tmp_path / "t"),
        schema,
        "id",
        ordering_field="ts" if ordering else None,
        options=options,
    ) as t:

        def rows(ids: list[str], ts: int, **extra: list[object]) -> pa.Table:
            cols: dict[str, object] = {"id": ids, "v": list(range(len(ids)))}
            if ordering:
                cols["ts"] = pa.array([ts] * len(ids), ordering)
            return pa.table({**cols, **extra})

        t.upsert(rows(["a", "b", "c", "d"], 1))
        t.delete(pa.table({"id": ["b"]}))
        t.upsert(rows(["c"], 2, _hoodie_is_deleted=[True]))
        t.upsert(rows(["b"], 3))  # a deleted key back, in a later commit
        want = ["a", "b", "d"]
        assert sorted(t.to_arrow().column("id").to_pylist()) == want
        assert sorted(hudi_read(t.uri).column("id").to_pylist()) == want


_TYPES = {
    "dictionary": pa.array(["x", "y"]).dictionary_encode(),
    "date64": pa.array([0, 86_400_000], pa.int64()).cast(pa.date64()),
    "fixed_size_binary": pa.array([b"abc", b"def"], pa.binary(3)),
    "decimal256": pa.array([1, 2], pa.int32()).cast(pa.decimal256(20, 2)),
    "string_view": pa.array(["x", "y"], pa.string_view()),
}


@pytest.mark.parametrize("name", sorted(_TYPES))
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_arrow_types_are_stored_in_their_hudi_form(
    tmp_path: Path, name: str, table_type: str
) -> None:
    # Logs kept these in their Arrow types, which hudi-rs does not reconcile with the
    # table's Avro schema; a string_view field failed the first write.
    from tests.hudi_readers import hudi_read

    values = _TYPES[name]
    schema = pa.schema([("id", pa.string()), ("x", values.type)])
    with Table.create(
        str(tmp_path / "t"), schema, "id", options=TableOptions(table_type=table_type)
    ) as t:
        t.upsert(pa.table({"id": ["a", "b"], "x": values}, schema=schema))
        t.upsert(pa.table({"id": ["a"], "x": values.slice(1, 1)}, schema=schema))
        ours = t.to_arrow(meta_columns=False).sort_by("id").column("x")
        theirs = hudi_read(t.uri).sort_by("id").column("x")
        want = [values[1].as_py()] * 2
        assert ours.to_pylist() == want
        assert theirs.cast(ours.type).to_pylist() == want


def test_a_decimal_wider_than_spark_reads_is_refused_at_create(tmp_path: Path) -> None:
    from dynbucket.base.errors import SchemaMismatchError

    schema = pa.schema([("id", pa.string()), ("x", pa.decimal256(40, 2))])
    with pytest.raises(SchemaMismatchError, match=r"'x' has type decimal256\(40, 2\).* 38"):
        Table.create(str(tmp_path / "t"), schema, "id")
    assert not (tmp_path / "t" / ".hoodie").exists()
