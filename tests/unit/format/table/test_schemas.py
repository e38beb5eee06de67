"""Schema evolution on write (``format/table/schemas.py``): what evolves, what is refused,
and an evolved table read by both readers across the change, through every service."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import ConcurrentWriteError, SchemaMismatchError
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.paths import SCHEMA_DIR
from dynbucket.format.table.schemas import WriteSchema, evolved, promotes
from dynbucket.format.table.spec import TableSpec
from dynbucket.options import SimpleBucketIndex
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads, hudi_read

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.int32())])
SPEC = TableSpec(SCHEMA, ("id",), ordering_field="ts")


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [
        (pa.int32(), pa.int64(), True),
        (pa.int8(), pa.int32(), True),
        (pa.int32(), pa.float64(), True),
        (pa.int64(), pa.float64(), True),  # Avro's long to double
        (pa.float32(), pa.float64(), True),
        (pa.decimal128(10, 2), pa.decimal128(12, 2), True),
        (pa.string(), pa.binary(), True),
        (pa.binary(), pa.string(), True),
        (pa.int64(), pa.int32(), False),
        (pa.float64(), pa.float32(), False),
        (pa.float64(), pa.int64(), False),
        (pa.decimal128(10, 2), pa.decimal128(12, 3), False),
        (pa.int64(), pa.string(), False),
        (pa.timestamp("us"), pa.date32(), False),
    ],
)
def test_promotions_are_avros(old: pa.DataType, new: pa.DataType, ok: bool) -> None:
    assert promotes(old, new) is ok


def test_a_new_nullable_field_goes_last_and_a_promoted_field_takes_the_new_type() -> None:
    incoming = pa.schema([("w", pa.string()), ("id", pa.string()), ("v", pa.int64())])
    assert evolved(SPEC, incoming) == pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("w", pa.string())]
    )
    # A narrower type of a field widens to the table's: nothing evolves.
    assert evolved(SPEC, pa.schema([("v", pa.int16())])) == SCHEMA
    # A delete marker is read, not stored.
    assert evolved(SPEC, pa.schema([("_hoodie_is_deleted", pa.bool_())]), ["_hoodie_is_deleted"])


@pytest.mark.parametrize(
    ("incoming", "message"),
    [
        (pa.schema([pa.field("w", pa.string(), nullable=False)]), "new field 'w' may not be null"),
        (pa.schema([("w", pa.null())]), "new field 'w' is of type null"),
        (pa.schema([("v", pa.string())]), "field 'v' has type string; the table has int32"),
        (pa.schema([("ts", pa.float64())]), "a key, partition or ordering field keeps its type"),
        (pa.schema([("id", pa.binary())]), "a key, partition or ordering field keeps its type"),
    ],
)
def test_what_hudi_refuses_is_refused_naming_the_field(incoming: pa.Schema, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        evolved(SPEC, incoming)


def test_evolution_off_refuses_new_fields_and_promotions() -> None:
    off = TableSpec(SCHEMA, ("id",), options=TableOptions(evolve_on_write=False))
    for incoming in (pa.schema([("w", pa.string())]), pa.schema([("v", pa.int64())])):
        with pytest.raises(SchemaMismatchError, match="schema.evolve-on-write=false"):
            evolved(off, incoming, enabled=False)


def _rows(t: Table, **read: object) -> dict[str, tuple[object, ...]]:
    rows = t.to_arrow(meta_columns=False, **read).to_pylist()  # type: ignore[arg-type]
    return {r["id"]: tuple(r[f] for f in r if f != "id") for r in rows}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("index", [None, SimpleBucketIndex(num_buckets=2)])
def test_an_evolved_table_reads_alike_across_the_change_and_its_services(
    tmp_path: Path, table_type: str, index: SimpleBucketIndex | None
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        ordering_field="ts",
        index=index,
        options={
            "hoodie.table.type": table_type,
            "hoodie.datasource.compaction.async.enable": False,
        },
    )
    before = t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": pa.array([1, 2], pa.int32())}))
    # A promotion (v: int32 -> int64, a value over 2^31) and a new field, in one write.
    change = t.upsert(pa.table({"id": ["b", "c"], "ts": [2, 2], "v": [2**40, 3], "w": ["x", "y"]}))
    written = next(i for i in t._timeline.completed() if i.id == change.instant)
    assert '"w"' in t._timeline.raw(written)["extraMetadata"]["schema"]  # Hudi's readers
    assert t.schema.names == ["id", "ts", "v", "w"] and t.schema.field("v").type == pa.int64()
    now = {"a": (1, 1, None), "b": (2, 2**40, "x"), "c": (2, 3, "y")}
    assert _rows(t) == now
    # Time travel before the change reads the schema of then.
    assert t.to_arrow(as_of=before.instant, meta_columns=False).schema == SCHEMA
    assert _rows(t, as_of=before.instant) == {"a": (1, 1), "b": (1, 2)}
    # An incremental read across it has the new fields.
    assert {r["id"]: r["w"] for r in t.changes(before.instant).to_pylist()} == {"b": "x", "c": "y"}
    check_hudi_reads(t, incremental_after=before.instant)
    # Records without the new field are refused, naming the ways out; a partial upsert
    # keeps what the table holds.
    with pytest.raises(SchemaMismatchError, match=r"\['w'\] of the table schema are missing"):
        t.upsert(pa.table({"id": ["a"], "ts": [3], "v": [5]}))
    t.upsert(pa.table({"id": ["b"], "ts": [3], "v": [7]}), partial=True)
    now["b"] = (3, 7, "x")
    # Every service that rewrites rows writes the new field: log compaction, compaction,
    # a rescale (simple bucket).
    t.compact()
    if index is not None:
        t.rescale(2)
    assert _rows(t) == now
    assert t.check().healthy
    check_hudi_reads(t)
    assert [s.names for _, s in t.schema_history()] == [SCHEMA.names, t.schema.names]


def test_a_rolled_back_change_is_never_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dynbucket.base.errors import CommitFailedError
    from dynbucket.format.timeline import outcome

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": pa.array([1], pa.int32())}))

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full while committing")

    monkeypatch.setattr(outcome, "decide_commit", broken)
    with pytest.raises(CommitFailedError):
        t.upsert(pa.table({"id": ["b"], "ts": [1], "v": [1], "w": ["x"]}))
    monkeypatch.undo()
    assert t.schema == SCHEMA and not list((tmp_path / "t" / SCHEMA_DIR).glob("*.json"))
    assert hudi_read(t.uri).num_rows == 1


def test_a_schema_changed_by_another_writer_fails_the_write_that_fitted_before(
    tmp_path: Path,
) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": pa.array([1], pa.int32())}))
    fitted = WriteSchema.of(t._store, t._spec, SCHEMA)  # another handle fitted its records
    Table.open(t.uri).upsert(pa.table({"id": ["b"], "ts": [1], "v": [1], "w": ["x"]}))
    with pytest.raises(ConcurrentWriteError, match="schema changed while this write prepared"):
        fitted.begun(t._store, "20991231000000000", t._timeline.visible())


def test_a_schema_change_compacts_the_slices_with_logs_first(tmp_path: Path) -> None:
    """hudi-rs (0.5) takes a log block written before a field was added and another
    promoted for a partial update, whose types must be the table's, and cannot read the
    table: a write that changes a merge-on-read table's schema compacts every slice with
    logs first, so the table reads right at once."""
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        ordering_field="ts",
        options={
            "hoodie.datasource.compaction.async.enable": False,
            "hoodie.log.compaction.enable": False,
        },
    )
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": pa.array([1, 2], pa.int32())}))
    t.upsert(pa.table({"id": ["a"], "ts": [2], "v": pa.array([5], pa.int32())}))  # a log
    before = len(t.history())
    t.upsert(pa.table({"id": ["b"], "ts": [3], "v": [7.5], "w": ["x"]}))  # both changes
    assert [h["action"] for h in t.history()[before:]] == ["compaction", "deltacommit"]
    assert _rows(t) == {"a": (2, 5.0, None), "b": (3, 7.5, "x")}
    check_hudi_reads(t, time_travel=False)
    t.upsert(pa.table({"id": ["a"], "ts": [4], "v": [1.0], "w": ["y"]}))  # no change: no compaction
    assert [h["action"] for h in t.history()[before + 2 :]] == ["deltacommit"]


REFUSED = [
    (
        pa.table({"id": ["a"], "ts": [1], "v": [1], "w": pa.array([None], pa.null())}),
        "is of type null",
    ),
    (
        pa.Table.from_arrays(
            [pa.array(["a"]), pa.array([1]), pa.array([1], pa.int32()), pa.array(["x"])],
            schema=pa.schema([*SCHEMA, pa.field("w", pa.string(), nullable=False)]),
        ),
        "new field 'w' may not be null",
    ),
    (
        pa.table({"id": ["a"], "ts": [1], "v": ["1"]}),
        "field 'v' has type string; the table has int32",
    ),
    (pa.table({"id": ["a"], "ts": [1.5], "v": pa.array([1], pa.int32())}), "ordering field keeps"),
    (pa.table({"id": [b"a"], "ts": [1], "v": pa.array([1], pa.int32())}), "key, partition or"),
]


@pytest.mark.parametrize(("records", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_a_refused_change_writes_nothing(tmp_path: Path, records: pa.Table, message: str) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": pa.array([1], pa.int32())}))
    before = sorted(p for p in (tmp_path / "t").rglob("*") if "lease" not in p.name)
    with pytest.raises(SchemaMismatchError, match=message):
        t.upsert(records)
    assert sorted(p for p in (tmp_path / "t").rglob("*") if "lease" not in p.name) == before
    assert t.schema == SCHEMA and len(t.history()) == 1


def test_with_evolution_off_records_that_would_evolve_are_refused(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        ordering_field="ts",
        options={"schema.evolve-on-write": False},
    )
    with pytest.raises(SchemaMismatchError, match=r"schema.evolve-on-write=false\): turn it on"):
        t.upsert(pa.table({"id": ["a"], "ts": [1], "v": [2**40]}))
    assert t.history() == []


def test_every_schema_problem_is_said_at_once_and_a_renamed_key_is_named(
    tmp_path: Path,
) -> None:
    schema = pa.schema(
        [("user_id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
    )
    t = Table.create(str(tmp_path / "t"), schema, "user_id", "day", "ts")
    renamed = pa.table({"id": ["a"], "day": ["d1"], "v": [1], "ts": [1]})
    with pytest.raises(SchemaMismatchError) as e:
        t.upsert(renamed)
    assert str(e.value) == (
        "the record key field 'user_id' is missing; the records have 'id' (string), which "
        "the table does not: renamed? give it as 'user_id'. Nothing was written."
    )
    several = pa.table({"id": ["a"], "v": ["x"], "ts": [1.5]})
    with pytest.raises(SchemaMismatchError, match=r"^4 problems with the records' fields: ") as e:
        t.upsert(several)
    said = str(e.value)
    for part in (
        "(1) the record key field 'user_id' is missing; the records have 'id'",
        "(2) the partition field 'day' is missing; (3)",
        "(3) field 'v' has type string",
        "(4) field 'ts' has type double",
    ):
        assert part in said, said
    assert t.history() == [] and t.schema == schema


@pytest.mark.parametrize(
    "new_type",
    [pa.uint64(), pa.duration("us"), pa.time32("s")],
    ids=["uint64", "duration", "time32"],
)
@pytest.mark.parametrize("version", [6, 9])
def test_a_new_field_with_no_avro_form_is_refused_before_any_instant(
    tmp_path: Path, new_type: pa.DataType, version: int
) -> None:
    uri = str(tmp_path / "t")
    with Table.create(uri, SCHEMA, "id", options=TableOptions(table_version=version)) as t:
        t.upsert(pa.table({"id": ["a"], "ts": [1], "v": pa.array([1], pa.int32())}))
        timeline = Path(uri) / ".hoodie" / ("timeline" if version == 9 else "")
        before = sorted(p.name for p in timeline.iterdir() if p.name[:1].isdigit())
        rows = pa.table(
            {
                "id": ["b"],
                "ts": [2],
                "v": pa.array([2], pa.int32()),
                "x": pa.array([1], pa.int32() if new_type == pa.time32("s") else pa.int64()).cast(
                    new_type
                ),
            }
        )
        with pytest.raises(SchemaMismatchError, match="'x' has type .* no Avro form"):
            t.upsert(rows)
        after = sorted(p.name for p in timeline.iterdir() if p.name[:1].isdigit())
        assert after == before
        assert t.check().healthy
        assert t.schema == SCHEMA


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize(
    "steps",
    [
        # A field added and another promoted: hudi-rs could not read the table at all.
        [
            {"id": ["a", "b"], "n": pa.array([1, 2], pa.int32()), "ts": [1, 1]},
            {"id": ["a"], "n": pa.array([3], pa.int32()), "ts": [2]},
            {"id": ["b"], "n": pa.array([4], pa.int64()), "ts": [3], "x": ["x"]},
        ],
        # Two fields added: hudi-rs took the older log for a partial update and returned
        # the losing record's x.
        [
            {"id": ["a", "b"], "n": [1, 2], "ts": [1, 1]},
            {"id": ["a"], "n": [5], "ts": [5]},
            {"id": ["a"], "n": [3], "ts": [3], "x": ["x3"]},
            {"id": ["b"], "n": [4], "ts": [4], "x": ["x4"], "y": ["y4"]},
            {"id": ["a", "c"], "n": [6, 7], "ts": [6, 6], "x": ["x6", None], "y": [None, "y7"]},
            {"id": ["c"], "n": [8], "ts": [8], "x": ["x8"], "y": ["y8"], "z": [1.5]},
        ],
    ],
    ids=["added-and-promoted", "added-three-times"],
)
def test_merge_on_read_schema_changes_read_the_same_in_hudi_rs(
    tmp_path: Path, steps: list[dict[str, object]], version: int
) -> None:
    options = TableOptions(
        table_version=version, compaction_async=False, compaction_delta_commits=100
    )
    first = pa.table(steps[0])
    with Table.create(
        str(tmp_path / "t"), first.schema, "id", ordering_field="ts", options=options
    ) as t:
        for step in steps:
            t.upsert(pa.table(step))
            ours = t.to_arrow(meta_columns=False).sort_by("id")
            theirs = hudi_read(t.uri).select(ours.column_names).sort_by("id").cast(ours.schema)
            assert theirs.to_pylist() == ours.to_pylist()
        assert t.check().healthy
