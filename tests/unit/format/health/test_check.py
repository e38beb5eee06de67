"""``check``: a healthy table is healthy (after updates, deletes, compaction, cleaning, on both
table types); each kind of damage is found, named, and given a fix; nothing is changed."""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.columns import DELETE, INSTANT, OP, UPSERT
from dynbucket.base.options import SimpleBucketIndex
from dynbucket.format.health.check import check
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.timeline.timeline import _METADATA
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.options import TableOptions
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])


def _rows(ids: range, ts: int, day: str = "d1") -> pa.Table:
    return pa.table(
        {"id": [f"k{i}" for i in ids], "day": [day] * len(ids), "ts": [ts] * len(ids)},
        schema=SCHEMA,
    )


def _table(tmp_path: Path, table_type: str = "MERGE_ON_READ") -> Table:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=10),
        TableOptions(table_type=table_type, cleaner_commits_retained=2),
    )
    t.upsert(_rows(range(25), 1))
    t.upsert(_rows(range(0, 40, 2), 2))
    t.upsert(_rows(range(5), 3, day="d2"))
    t.delete(pa.table({"id": ["k3", "k4"], "day": ["d1", "d1"]}))
    return t


def _files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_healthy_table_is_healthy_and_nothing_changes(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type)
    t.compact()
    t.upsert(_rows(range(30, 45), 4))
    t.clean()
    t.wait_for_services()  # a clean due after the writes runs beside them
    before = _files(tmp_path)
    report = t.check()
    assert report.findings == [], [str(f) for f in report.findings]
    # d1: 25 keys, 7 more, 2 deleted, 10 more; d2: 5 keys: 47 insert entries and the
    # deletes' 2 tombstones.
    assert (report.live_rows, report.index_entries) == (45, 49)
    assert re.search(
        r": healthy \(\d+ completed instants, \d+ files, 45 live rows, 49 index "
        r"entries read\)$",
        report.summary(),
    )
    assert str(report) == "\n".join([*(f"note: {n}" for n in report.notes), report.summary()])
    assert _files(tmp_path) == before


def _newest(t: Table, pattern: str) -> Path:
    """The newest file matching ``pattern`` (the index's files aside, unless asked for)."""
    found = [
        p
        for p in Path(t.uri).rglob(pattern)
        if ".dynbucket" not in str(p.relative_to(t.uri)) or ".dynbucket" in pattern
    ]
    return sorted(found, key=lambda p: p.name.split("_")[-1])[-1]


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _ghost_entry(t: Table) -> None:
    """An index entry, in a committed index file, for a key the table never had."""
    index = RecordLevelIndex(t._store, t._spec)
    entries = index.record_index_locations("day=d2", {i.id for i in t._timeline.completed()})
    ghost = entries.slice(0, 1).to_pylist()[0]
    ghost.update(id="ghost", _hash=12345)
    index.write("day=d2", ghost["_instant"], pa.Table.from_pylist([ghost]), task="ghost")


def _entry_twice(t: Table, op: int) -> None:
    """A second insert entry (``op`` upsert) for a live key of d2, or a second tombstone
    (``op`` delete) for one of d1's deleted keys, in a newer index file."""
    index = RecordLevelIndex(t._store, t._spec)
    part = "day=d2" if op == UPSERT else "day=d1"
    raw = index.record_index_locations(part, {i.id for i in t._timeline.completed()}, raw=True)
    raw = raw.filter(pc.equal(raw.column(OP), op))
    again = raw.slice(0, 1).to_pylist()[0]
    newest = max(raw.column(INSTANT).to_pylist())
    again.update(_instant=str(int(newest) + 1))
    index.write(part, newest, pa.Table.from_pylist([again]), task="again")


def _second_group(t: Table) -> None:
    """A copy of a bucket's base file under another file id: two groups for one bucket."""
    base = _newest(t, "day=d2/*.parquet")
    shutil.copy(
        base,
        base.with_name("00000000-0000-0000-0000-000000000000" + base.name[base.name.index("_") :]),
    )


def _dead_writer(t: Table) -> None:
    txn = Transaction.begin(t._store, t._spec, "commit", "upsert", lease_seconds=5.0)
    txn.lock.release()  # the process died: its instant stays pending, its lease lapses


def _lost_instant(t: Table) -> None:
    """Every timeline file of the newest commit gone (a lost instant, not a pending one)."""
    instant = _newest(t, ".hoodie/*.deltacommit").name.split(".")[0]
    for f in (Path(t.uri) / ".hoodie").glob(f"{instant}.*"):
        f.unlink()


def _named_twice(t: Table) -> None:
    """The newest commit lists one of its files twice (what two jobs writing one file left)."""
    path = _newest(t, ".hoodie/*.deltacommit")
    doc = json.loads(path.read_bytes())
    stats = next(iter(doc["partitionToWriteStats"].values()))
    stats.append(dict(stats[0]))
    path.write_text(json.dumps(doc))
    _METADATA.clear()  # this process parsed it before the damage


DAMAGE: list[tuple[str, Callable[[Table], None], str]] = [
    (
        "a deleted data file",
        lambda t: _newest(t, "day=d2/*.parquet").unlink(),
        r"day=d2/.*\.parquet \(data file of completed instant \d+\) is missing",
    ),
    (
        "a log file cut short",
        lambda t: _cut(_newest(t, ".*.log.*")),
        r"\.log\.\d+_.* \(data file of completed instant \d+\) is damaged",
    ),
    (
        "a base file cut short",
        lambda t: _cut(_newest(t, "day=d1/*.parquet")),
        r"day=d1/.*\.parquet \(data file of completed instant \d+\) is damaged",
    ),
    (
        "an instant file cut short",
        lambda t: _cut(_newest(t, ".hoodie/*.deltacommit")),
        r"the metadata of completed instant \d+ is not a complete JSON document",
    ),
    (
        "an index entry for a key that is not live",
        _ghost_entry,
        r"partition 'day=d2', bucket \d+: 1 index entries name keys that have no live row, "
        r"more than the file group ever deleted \(0\)",
    ),
    (
        "a second insert entry for a live key",
        functools.partial(_entry_twice, op=UPSERT),
        r"partition 'day=d2': 1 key\(s\) have two live index entries",
    ),
    (
        "a tombstone of a deleted key",
        functools.partial(_entry_twice, op=DELETE),
        r"partition 'day=d1': 1 key\(s\) have two live index entries, or a tombstone of no",
    ),
    (
        "two file groups for one bucket",
        _second_group,
        r"bucket 0 of partition 'day=d2' has 2 file groups",
    ),
    ("a dead writer's pending instant", _dead_writer, r"left pending by a writer that died"),
    (
        "files of an instant the timeline lost",
        _lost_instant,
        r"file\(s\) of instant \d+, which is not on the timeline",
    ),
    (
        "a commit that names a file twice",
        _named_twice,
        r"completed instant \d+ names 1 file\(s\) twice",
    ),
]


@pytest.mark.parametrize(("case", "damage", "message"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damage_is_found_and_named(
    tmp_path: Path, case: str, damage: Callable[[Table], None], message: str
) -> None:
    t = _table(tmp_path)
    damage(t)
    before = _files(tmp_path)
    report = check(t._store)
    assert not report.healthy
    found = [str(f) for f in report.findings]
    assert any(re.search(message, f) for f in found), found
    assert all("fix: " in f for f in found)
    assert _files(tmp_path) == before  # a check changes nothing


def test_a_live_key_without_its_index_entry_is_found(tmp_path: Path) -> None:
    t = _table(tmp_path)
    for f in Path(t.uri).rglob(".hoodie/.dynbucket/rli/day=d2/*.parquet"):
        kept = pq.read_table(f).slice(1)
        pq.write_table(kept, f)
    found = [str(f) for f in check(t._store).findings]
    assert any("1 live key(s) have no index entry" in f for f in found), found


def test_a_rescale_that_wrote_fewer_rows_than_it_read_is_found(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", "ts", SimpleBucketIndex(num_buckets=2)
    )
    t.upsert(_rows(range(40), 1))
    done = t.rescale(2)
    assert t.check().healthy
    path = Path(t.uri) / ".hoodie" / f"{done.instant}.deltacommit"
    doc = json.loads(path.read_bytes())
    stat = doc["partitionToWriteStats"]["day=d1"][0]
    stat["numWrites"] -= 1  # as if one row of the group never reached its file
    path.write_text(json.dumps(doc))
    _METADATA.clear()
    found = [str(f) for f in check(t._store).findings]
    assert any(
        re.search(rf"instant {done.instant} \(rescale\) read 40 live rows and wrote 39", f)
        for f in found
    ), found


def test_a_key_in_two_partitions_of_a_global_index_table_is_found(tmp_path: Path) -> None:
    """k0-k4 live in d1 and in d2: fine per partition, not with a global index."""
    t = _table(tmp_path)
    assert check(t._store).healthy
    definition = Path(t.uri) / ".hoodie" / ".dynbucket" / "table.json"
    spec = json.loads(definition.read_text())
    spec["index"]["dynamic-bucket.global-index"] = "true"
    definition.write_text(json.dumps(spec))
    found = [str(f) for f in check(t._store).findings]
    assert any("3 key(s) have live rows in more than one partition" in f for f in found), found


def test_a_path_without_a_table_is_said_so_not_given_a_repair(tmp_path: Path) -> None:
    from dynbucket.format.storage.store import TableStore

    (tmp_path / "folder").mkdir()
    for path, why in (
        (tmp_path / "folder", "is not a dynbucket table"),
        (tmp_path / "nowhere", "does not exist"),
    ):
        report = check(TableStore.at(str(path)))
        (found,) = [str(f) for f in report.findings]
        assert found.startswith("no table here: ") and why in found, found
        assert "fix: nothing to repair: give the path of a table" in found
        assert str(report) == f"PROBLEM: {found}\n{report.summary()}"  # what a person reads
    t = _table(tmp_path)  # a table whose definition went: restore it
    Path(t._store.path(".hoodie/.dynbucket/table.json")).unlink()
    Path(t._store.path(".hoodie/hoodie.properties")).unlink()
    (found,) = [str(f) for f in check(t._store).findings]
    assert "the table's definition is gone" in found and "restore .hoodie/" in found


def test_a_clean_left_pending_after_it_removed_files_is_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed while its clean ran (the several-writers model, 1 run in 25): the
    clean's plan said its horizon before it removed the old slices' files, and it stays
    pending until the next clean runs it. check says so and finds nothing missing (it told
    the user to restore the files from a backup)."""
    from dynbucket.format.services.clean import execute_clean, schedule_clean

    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", "ts", options=TableOptions(clean_automatic=False)
    )
    for ts in range(3):
        t.upsert(_rows(range(4), ts))
    t.compact()
    t.upsert(_rows(range(2), 9))
    planned = schedule_clean(t._store, t._spec, retain=1)
    assert planned is not None

    def killed(self: Transaction, *args: object) -> None:
        raise KeyboardInterrupt  # after every removal, before its commit point

    monkeypatch.setattr(Transaction, "commit", killed)
    before = len(_files(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        execute_clean(t._store, t._spec, planned)
    monkeypatch.undo()
    assert len(_files(tmp_path)) < before  # it removed the old slice's files
    report = t.check()
    assert report.healthy, [str(f) for f in report.findings]
    assert any(f"clean {planned} is running or was left pending" in n for n in report.notes)
    rows = {r["id"]: r["ts"] for r in t.to_arrow().to_pylist()}
    assert rows == {"k0": 9, "k1": 9, "k2": 2, "k3": 2}
