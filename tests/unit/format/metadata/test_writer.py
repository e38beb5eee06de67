"""A table of version 9 keeps Hudi's metadata table: its ``files`` partition lists exactly
the files of completed instants through every operation and service, and hudi-rs reads the
table through it (a stray file planted in a partition folder stays invisible to hudi-rs;
listing storage, it would read it)."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket import DynamicBucketIndex, SimpleBucketIndex, Table, TableOptions
from dynbucket.base.errors import ConfigError
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi import properties
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata import compaction as metadata_compaction
from dynbucket.format.metadata import record_index, records
from dynbucket.format.metadata import writer as metadata_writer
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.timeline.transaction import Transaction
from tests.hudi_readers import check_hudi_reads, hudi_read

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)


def _rows(ids: range, v: int) -> pa.Table:
    keys = [f"k{i:03d}" for i in ids]
    return pa.table(
        {"id": keys, "day": [f"d{i % 2}" for i in ids], "v": [v] * len(keys), "ts": [v] * len(keys)}
    )


def _listed_is_stored(t: Table) -> None:
    """The ``files`` partition lists each partition's data files of completed instants,
    with their sizes, and nothing else; the ``record_index`` holds each live key at its
    row's partition and file group (a lookup too), and no other key."""
    snapshot = t.snapshot()
    visible = snapshot.timeline.visible()
    mdt = MetadataTable(t._store)
    listing = mdt.listing()
    for partition in snapshot.partitions():
        stored = {f.name: f.size for f in data_files(t._store, partition) if f.instant in visible}
        assert listing.get(partition, {}) == stored, partition
    rows = t.to_arrow().to_pylist()
    live = {(r["_partition"], r["id"]): r["_file_id"] for r in rows}
    if not t._spec.scheme.index_entries:  # no index of keys, no record index
        assert not (Path(t.uri) / ".hoodie" / "metadata" / "record_index").exists()
        return
    index = {k: loc.file_id for k, loc in mdt.record_index().items()}
    assert index == live
    assert mdt.partitioned() == t._spec.partitioned_record_index
    for partition in {p for p, _ in live}:
        keys = sorted(k for p, k in live if p == partition)
        some = keys[:: max(1, len(keys) // 5)] + ["k999"]
        scope = partition if mdt.partitioned() else None
        assert {k: v.file_id for k, v in mdt.lookup(some, scope).items()} == {
            k: live[(partition, k)] for k in some if (partition, k) in live
        }


def test_every_operation_keeps_the_files_partition_and_hudi_rs_reads_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metadata_compaction, "MAX_DELTAS", 3)  # a new base every 3 deltas
    opts = TableOptions(
        table_version=9,
        compaction_delta_commits=2,
        compaction_async=False,
        compaction_inline=True,
        clean_max_commits=2,
        cleaner_commits_retained=2,
        keep_min_commits=3,
        keep_max_commits=5,
        heartbeat_expiry_seconds=0.5,
    )
    uri = str(tmp_path / "t")
    index = DynamicBucketIndex(max_keys_per_bucket=8)
    t = Table.create(uri, SCHEMA, "id", "day", "ts", index, opts)
    hoodie = properties.loads((tmp_path / "t" / ".hoodie" / "hoodie.properties").read_bytes())
    assert (hoodie["hoodie.table.version"], hoodie["hoodie.timeline.layout.version"]) == ("9", "2")
    assert hoodie["hoodie.table.metadata.partitions"] == "files,record_index"
    assert hoodie["hoodie.table.ordering.fields"] == "ts"
    first = t.upsert(_rows(range(0, 30), 1)).instant
    t.insert(_rows(range(30, 40), 2))
    # A partition-scoped index: a key in two partitions, each its own entry in Hudi's
    # partitioned record index (a global one would hold one, and lose it at a delete).
    t.upsert(pa.table({"id": ["k000"], "day": ["d1"], "v": [2], "ts": [2]}))
    groups = {
        p.name.split("_")[0] for p in (tmp_path / "t/.hoodie/metadata/record_index").iterdir()
    }
    assert groups >= {".record-index-day%3Dd0-0000-0", ".record-index-day%3Dd1-0000-0"}
    # A key lookup reads that index (an HFile key lookup in the key's partition's group).
    with monkeypatch.context() as m:
        m.setattr(RecordLevelIndex, "lookup", lambda *a, **k: pytest.fail("own index asked"))
        found = t.lookup(pa.table({"id": ["k000", "k000", "k999"], "day": ["d0", "d1", "d0"]}))
    assert sorted((r["day"], r["v"]) for r in found.to_pylist()) == [("d0", 1), ("d1", 2)]
    ran: list[str] = []
    for v in range(3, 9):  # updates: logs, log compactions, compactions, cleans, archival
        # and a new key each: record index logs, compacted by the metadata compaction
        rows = pa.concat_tables([_rows(range(v, 40, 3), v), _rows(range(50 + v, 51 + v), v)])
        ran += t.upsert(rows).services
        _listed_is_stored(t)
    t.delete(pa.table({"id": ["k001", "k002", "k000"], "day": ["d1", "d0", "d1"]}))
    assert {k for k in MetadataTable(t._store).record_index() if k[1] == "k000"} == {
        ("day=d0", "k000")
    }
    # A writer dies mid-write: its file is never listed, and the next writer's rollback of
    # its instant leaves the listing as it was.
    dead = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert dead.heartbeat is not None
    orphan = next((tmp_path / "t" / "day=d0").glob("*.parquet"))
    shutil.copy(orphan, orphan.with_name(f"{orphan.name[:8]}-dead_0-{dead.id}-0_{dead.id}.parquet"))
    dead.heartbeat._stop.set()
    time.sleep(0.6)
    t.upsert(_rows(range(40, 45), 9))  # settles (rolls back) the dead writer's instant
    assert dead.id not in {i.id for i in t.snapshot().timeline.instants()}
    t.upsert(_rows(range(0, 45, 4), 10))
    t.compact()
    t.clean()
    _listed_is_stored(t)
    timeline = t.snapshot().timeline
    assert timeline.archived().floor >= first  # archival ran
    assert any(i.action == "compaction" for i in timeline.completed())
    # The metadata table is compacted beside the writes, as instants of their own (Hudi's
    # compaction on its timeline), and stays small: a base and its logs, the slice
    # before, and the one before that until the next compaction's plan removes it; its
    # own instants before the previous rewrite archived.
    assert any(s.startswith("metadata-compaction") for s in ran), ran
    mdt = tmp_path / "t" / ".hoodie" / "metadata"
    bases = sorted(p.name for p in (mdt / "files").glob("*.hfile"))
    assert 2 <= len(bases) <= 3
    logs = [p.name.split("_")[1][:17] for p in (mdt / "files").glob(".*.log.*")]
    assert min(logs) > bases[0].rsplit("_", 1)[1][:17]  # none of a slice removed
    active = [p.name for p in (mdt / ".hoodie" / "timeline").glob("*.deltacommit")]
    assert min(active) >= bases[0].rsplit("_", 1)[1][:17]
    assert any((mdt / ".hoodie" / "timeline" / "history").glob("*.parquet"))
    check_hudi_reads(t)  # the snapshot, every retained instant, read-optimized
    assert t.check().healthy
    # hudi-rs lists through the metadata table: a copy of a base file under a file id no
    # instant wrote, named as a completed instant's, stays invisible (listing storage,
    # hudi-rs reads it: its rows twice).
    rows = hudi_read(uri).num_rows
    base = next((tmp_path / "t" / "day=d1").glob("*.parquet"))
    shutil.copy(base, base.with_name("99999999" + base.name[8:]))
    assert hudi_read(uri).num_rows == rows
    # check says so (and dynbucket's own reader, which lists storage, refuses the copy).
    (finding,) = [f for f in t.check().findings if "metadata table" in f.problem]
    assert "day=d1: 1 data file(s) not listed in the metadata table" in finding.problem
    assert "99999999" in finding.problem
    hoodie["hoodie.table.metadata.partitions"] = ""
    (tmp_path / "t" / ".hoodie" / "hoodie.properties").write_bytes(properties.dumps(hoodie))
    assert hudi_read(uri).num_rows > rows
    t.close()


def test_a_rescale_replaces_file_groups_in_the_listing(tmp_path: Path) -> None:
    opts = TableOptions(table_version=9, compaction_async=False)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "ts", SimpleBucketIndex(2), opts)
    t.upsert(_rows(range(0, 20), 1))
    t.upsert(_rows(range(0, 20, 3), 2))
    t.rescale(2)
    t.upsert(_rows(range(5, 25), 3))
    _listed_is_stored(t)
    check_hudi_reads(t)
    t.close()


def test_a_table_is_created_in_version_6_or_9() -> None:
    with pytest.raises(ConfigError, match="hoodie.table.version=7: must be one of"):
        TableOptions(table_version=7)


def test_an_instant_completing_while_a_rewrite_is_decided_is_in_the_new_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delta is recorded while another instant (a log compaction beside the writes)
    is pending: no rewrite. If that instant completes between the moment the metadata
    table was read and the moment the writer asks whether one is pending, the rewrite
    must merge it (a view read before would leave its log in the slice it replaces,
    its files unlisted: seen once in about four runs of the adoption test)."""
    from dynbucket.format.hudi.commit import WriteStat, commit_metadata
    from dynbucket.format.timeline.timeline import COMPLETION_TIME, Timeline

    # Every group with a log is at the bound: a write rewrites it itself.
    monkeypatch.setattr(metadata_compaction, "MAX_LOGS", 1)
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", "ts", options=TableOptions(table_version=9)
    )
    t.upsert(_rows(range(0, 4), 1))
    store, timeline = t._store, Timeline(t._store, True)

    def document(name: str, completion: str) -> dict[str, object]:
        stat = WriteStat("day=d0", name, f"day=d0/{name}.parquet", None, 1, 1, 0, 0, 7)
        return {
            **commit_metadata([stat], "upsert", t._spec.avro_schema(), {}),
            COMPLETION_TIME: completion,
        }

    beside = timeline.start(timeline.request("commit"), {})
    write = timeline.start(timeline.request("commit"), {})
    beside_doc = document("beside", timeline.completion_time())
    metadata_writer.record(store, beside.id, beside_doc)  # its delta, its instant pending

    def completes_then_answers() -> bool:
        timeline.complete(beside, beside_doc)
        return False

    metadata_writer.record(
        store, write.id, document("write", timeline.completion_time()), completes_then_answers
    )
    timeline.complete(write, document("write", timeline.completion_time()))
    listed = MetadataTable(store).listing()["day=d0"]
    assert {"beside.parquet", "write.parquet"} <= set(listed)
    # The new base itself lists it: once the instant's own metadata instant is archived
    # (its completion time no longer on the timeline), its log counts in the old slice.
    mdt = MetadataTable(store)
    base = mdt.file_groups("files")["files-0000-0"]
    assert base.base is not None and write.id in base.base
    in_base = {}
    for key, value, schema in mdt.slice_records("files", type(base)(base.base, ())):
        records.merge_listing(in_base.setdefault(key, {}), value, schema)
    assert {"beside.parquet", "write.parquet"} <= set(in_base["day=d0"])
    t.close()


def test_a_global_record_index_of_a_partition_scoped_table_is_continued_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition-scoped table whose record index has the global layout (as dynbucket
    made them before the partitioned one) goes on in that layout, its lookups asking
    dynbucket's own index; ``check`` names a key live in two partitions there, which the
    global layout cannot hold."""
    from dynbucket.format.table.spec import TableSpec

    with monkeypatch.context() as m:
        m.setattr(TableSpec, "partitioned_record_index", property(lambda self: False))
        t = Table.create(
            str(tmp_path / "t"), SCHEMA, "id", "day", "ts", options=TableOptions(table_version=9)
        )
    t.upsert(_rows(range(0, 6), 1))
    assert not MetadataTable(t._store).partitioned()
    assert t.check().healthy
    t.upsert(pa.table({"id": ["k000"], "day": ["d1"], "v": [2], "ts": [2]}))
    assert not MetadataTable(t._store).partitioned()
    found = t.lookup(pa.table({"id": ["k000", "k000"], "day": ["d0", "d1"]}))
    assert sorted((r["day"], r["v"]) for r in found.to_pylist()) == [("d0", 1), ("d1", 2)]
    (finding,) = [f for f in t.check().findings if "more than one partition" in f.problem]
    assert '["k000"]' in finding.problem
    t.close()


@pytest.mark.parametrize(
    ("max_logs", "ratio", "soft"),
    [(40, 0.0, 20), (40, 1e9, 2), (2, 0.0, 20)],
    ids=["by-bytes", "by-soft-bound", "at-most-logs"],
)
def test_one_record_index_group_is_rewritten_per_write_unless_at_most_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_logs: int, ratio: float, soft: int
) -> None:
    """Three partitions written together fall due together (by their logs' bytes, or at
    ``SOFT_LOGS`` logs however few their bytes): the metadata compaction after each
    write rewrites one of their record index groups, the one with the most logs, and each
    is rewritten in turn; groups at ``MAX_LOGS`` are rewritten all at once, the bound a
    reader relies on. The index stays equal to the live keys throughout."""
    t, rewrites, most = _write_rounds(tmp_path, monkeypatch, 3, 9, ratio, soft, max_logs)
    assert most <= max(max_logs, 2 + 2)
    per_write = sorted(len(g) for g in rewrites.values())
    if max_logs == 40:
        assert per_write and per_write[-1] == 1  # never two in one write
        each = Counter(g for gs in rewrites.values() for g in gs)
        assert len(each) == 3 and min(each.values()) >= 2, each  # each group in turn, again
    else:
        assert per_write[-1] == 3  # all three at the bound, in one write
    _listed_is_stored(t)
    t.close()


def test_a_group_is_due_by_its_logs_records_not_the_schema_each_log_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each log carries the record schema twice (about 10 KB): counted as written, two
    logs of one key each outweigh a fifth of a base of thousands of keys, and the group
    would be rewritten every ``MAX_DELTAS`` writes however large it is. Counted by its
    records' bytes, single-key logs wait for ``MAX_LOGS``; logs of many new keys (a
    fifth of the base's) make the group due at ``MAX_DELTAS``. The metadata compaction
    after a write (inline here) rewrites the group the write made due."""
    monkeypatch.setattr(metadata_compaction, "MAX_DELTAS", 2)
    monkeypatch.setattr(metadata_compaction, "MAX_LOGS", 6)
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=10_000),
        TableOptions(table_version=9, compaction_async=False),
    )
    written = iter(range(1_000_000))

    def write(count: int) -> tuple[str | None, int]:
        """Upsert ``count`` new keys into day d0: its group's base and logs after it."""
        keys = [f"k{next(written):06d}" for _ in range(count)]
        t.upsert(pa.table({"id": keys, "day": ["d0"] * count, "v": [1] * count, "ts": [1] * count}))
        (group,) = MetadataTable(t._store).file_groups("record_index").values()
        return group.base, len(group.logs)

    assert write(3000) == (None, 1)
    base, logs = write(1)  # MAX_DELTAS logs and no base: compacted, a base of 3,001 keys
    assert base is not None and logs == 0
    for n in range(1, 6):  # single-key logs: six of them are far from a fifth of the base
        assert write(1) == (base, n)
    second, logs = write(1)  # six logs: MAX_LOGS, whatever their bytes
    assert second != base and logs == 0
    assert write(700) == (second, 1)
    third, logs = write(700)  # two logs of a fifth of the base's keys: due
    assert third != second and logs == 0
    _listed_is_stored(t)
    t.close()


def test_groups_of_many_partitions_written_together_are_spread_over_the_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve partitions written by every write fall due together, more than one a write
    can take before the first reaches ``MAX_LOGS`` (three writes later here): the
    metadata compaction after each write rewrites as many as finish them all in time,
    never all twelve at once, and no slice holds more than ``MAX_LOGS`` logs."""
    # Due by their count only (3 logs), rewritten before 6.
    t, rewrites, most = _write_rounds(tmp_path, monkeypatch, 12, 12, 1e9, 3, 6)
    assert most <= 6
    per_write = Counter(len(g) for g in rewrites.values())
    # Due together, spread over the compactions left before 6 logs: never all twelve in
    # one, at most half (the first wave, due at 2 logs with no base yet: 3 a compaction).
    assert 1 < max(per_write) <= 6, per_write
    _listed_is_stored(t)
    t.close()


def _write_rounds(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
    writes: int,
    ratio: float,
    soft: int,
    max_logs: int,
) -> tuple[Table, dict[str, set[str]], int]:
    """``writes`` writes of a new key into each of ``partitions`` partitions, with the
    rewrite rule's bounds set (``MAX_DELTAS`` 2; services inline, after each write): the
    table, the record index groups each instant rewrote, and the most logs a group's
    slice held after a write."""
    from dynbucket.format.metadata.reader import BASE_NAME

    monkeypatch.setattr(metadata_compaction, "MAX_DELTAS", 2)
    monkeypatch.setattr(metadata_compaction, "LOG_RATIO", ratio)
    monkeypatch.setattr(metadata_compaction, "SOFT_LOGS", soft)
    monkeypatch.setattr(metadata_compaction, "MAX_LOGS", max_logs)
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=100),
        TableOptions(table_version=9, compaction_async=False),
    )
    folder = tmp_path / "t" / ".hoodie" / "metadata" / "record_index"
    rewrites: dict[str, set[str]] = {}
    most = 0
    for n in range(writes):
        keys = [f"k{n:02d}{p:02d}" for p in range(partitions)]
        t.upsert(
            pa.table(
                {
                    "id": keys,
                    "day": [f"d{p:02d}" for p in range(partitions)],
                    "v": [n] * partitions,
                    "ts": [n] * partitions,
                }
            )
        )
        for f in folder.glob("*.hfile"):
            m = BASE_NAME.match(f.name)
            assert m is not None
            if m["instant"] != metadata_writer.INIT_INSTANT:
                rewrites.setdefault(m["instant"], set()).add(m["file_id"])
        slices = MetadataTable(t._store).file_groups("record_index")
        assert len(slices) == partitions
        most = max(most, *(len(s.logs) for s in slices.values()))
    return t, rewrites, most


def test_a_commit_records_its_keys_in_the_record_index_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that wrote an instant's index files hands their entries to the
    metadata table's record index at the commit (no file read back); a settler, which
    has none in memory, reads the files: the record index is the same either way."""
    reads: list[str] = []
    real = record_index.pq.read_table

    def counting(path: str, *args: object, **kwargs: object) -> pa.Table:
        reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(record_index.pq, "read_table", counting)
    options = TableOptions(table_version=9)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "ts", options=options)
    t.upsert(_rows(range(40), 1))
    t.upsert(_rows(range(20, 60), 2))
    assert reads == []
    mdt = MetadataTable(t.store)
    live = {
        k for p in ("day=d0", "day=d1") for k in mdt.record_locations(p).column("key").to_pylist()
    }
    assert live == {f"k{i:03d}" for i in range(60)}
    # The same instant's keys, from its files: what a settler records.
    last = t._timeline.completed()[-1]
    held = record_index.changes(t.store, t._timeline.raw(last))
    assert reads and sorted(held.column("key").to_pylist()) == [f"k{i:03d}" for i in range(40, 60)]
    t.close()
