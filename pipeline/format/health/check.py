"""``dynbucket check``: is a table whole? What a user runs after an incident.

Reads everything a reader or the next writer relies on, and reports each problem with what
to do about it (nothing is changed):

1. The definition (``hoodie.properties``, ``table.json``) reads, in a Hudi table version
   dynbucket writes (a table Apache Hudi wrote, or a Hudi 1.x writer upgraded, is said so).
2. Every completed instant's metadata reads; a pending instant with no live writer is a
   dead writer's.
3. Every file a retained completed instant lists is there and reads whole (base files,
   every block of log files, index files).
4. The latest snapshot reads; no bucket has two file groups (I4); with a global index, no
   key has rows in two partitions (I2).
5. The record-level index agrees with the live rows (I6): each live key has one entry,
   naming its bucket and file group; keys without a live row hold entries only as far as
   the file group ever deleted keys (deleted keys keep their bucket). A simple-bucket or
   consistent-hashing table has no index: each live key must sit in the bucket its
   partition's layout computes.
6. No data or index file belongs to an instant the timeline does not have.
7. A table with Hudi's metadata table: its ``files`` partition lists each partition's data
   files of completed instants, with their sizes, and no other (Hudi's readers list files
   from it, not from storage); its ``record_index`` holds each live key once, at the
   partition and file group of its row, and no other key.
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import BUCKET, DELETE, FILE_ID, HASH, INSTANT, OP, PARTITION
from dynbucket.base.errors import (
    DynBucketError,
    NotAdoptedError,
    NotATableError,
    UnsupportedTableVersionError,
)
from dynbucket.base.keyhash import key_hashes
from dynbucket.format.file_group import adopted
from dynbucket.format.file_group.merge import KEY
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi import avro_read, log_file
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.instant_files import HUDI_ACTIONS
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.index.file_names import index_instant
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.agreement import disagreement
from dynbucket.format.metadata.reader import RECORD_INDEX, MetadataTable
from dynbucket.format.read.snapshot import Snapshot, cleaning_horizon
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR, RLI_DIR
from dynbucket.format.table.spec import TableSpec, load_table
from dynbucket.format.timeline import heartbeat, outcome
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.plans import left_pending
from dynbucket.format.timeline.timeline import (
    Instant,
    Timeline,
    Visible,
    seconds_since,
)
from dynbucket.format.timeline.transaction import DETACHED_ACTIONS


@dataclass(frozen=True)
class Finding:
    """One problem: what is wrong, and what to do."""

    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.problem}\n    fix: {self.fix}"


@dataclass
class CheckReport:
    """What ``check`` read and found."""

    table: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    instants: int = 0
    files: int = 0
    live_rows: int = 0
    index_entries: int = 0

    @property
    def healthy(self) -> bool:
        return not self.findings

    def add(self, problem: str, fix: str) -> None:
        self.findings.append(Finding(problem, fix))

    def __str__(self) -> str:
        """What a person reads: each note and problem (with its fix), then the summary
        line (``repr`` keeps every field)."""
        lines = [f"note: {n}" for n in self.notes]
        lines += [f"PROBLEM: {f}" for f in self.findings]
        return "\n".join([*lines, self.summary()])

    def summary(self) -> str:
        read = (
            f"{self.instants} completed instants, {self.files} files, {self.live_rows:,} "
            f"live rows, {self.index_entries:,} index entries"
        )
        if self.healthy:
            return f"{self.table}: healthy ({read} read)"
        return f"{self.table}: {len(self.findings)} problem(s) ({read} read)"


def check(store: TableStore) -> CheckReport:
    """Checks the table at ``store`` (the numbered steps of the module doc)."""
    report = CheckReport(store.uri)
    try:  # 1.
        spec = load_table(store)
    except NotAdoptedError as e:
        report.add(
            f"written by Apache Hudi, not adopted by dynbucket: {e}",
            f"nothing to repair; adopt it (dynbucket adopt {store.uri}) to check and write "
            "it with dynbucket, or check it with Hudi's own tools",
        )
        return report
    except UnsupportedTableVersionError as e:
        report.add(
            f"not checked: {e}",
            "bring its properties and timeline to one version with Hudi, as said above",
        )
        return report
    except NotATableError as e:
        if store.exists(store.path(HOODIE_DIR)):  # a table's metadata, without its definition
            report.add(f"the table's definition is gone: {e}", "restore .hoodie/ from a backup")
        else:
            report.add(f"no table here: {e}", "nothing to repair: give the path of a table")
        return report
    except DynBucketError as e:
        report.add(f"the table's definition does not read: {e}", "restore .hoodie/ from a backup")
        return report
    timeline = Timeline(store, spec.options.merge_on_read)
    completed = _instants(store, spec, timeline, report)  # 2.
    _guarded(
        report,
        "the files of completed instants",
        lambda: _files(store, spec, timeline, completed, report),
    )  # 3.
    rows = _snapshot(store, spec, report)  # 4.
    if rows is not None:
        _guarded(report, "keys unique in the table", lambda: _unique(spec, rows, report))
    if rows is not None and not spec.scheme.index_entries:
        _guarded(report, "the bucket layout", lambda: _layout(store, spec, rows, report))  # 5.
    elif rows is not None:
        _guarded(
            report,
            "the record-level index",
            lambda: _index(store, spec, rows, timeline, completed, report),
        )  # 5.
    _guarded(report, "the table's files", lambda: _orphans(store, timeline, report))  # 6.
    if metadata_partitions.enabled(store):
        _guarded(
            report,
            "the metadata table",
            lambda: _metadata_table(store, spec, timeline, rows, report),
        )  # 7.
    return report


def _guarded(report: CheckReport, what: str, step: Callable[[], None]) -> None:
    """Runs a step; whatever stops it from reading is itself a finding."""
    try:
        step()
    except Exception as e:
        report.add(
            f"{what} could not be read: {type(e).__name__}: {e}",
            "restore the damaged files from a backup",
        )


def _instants(
    store: TableStore, spec: TableSpec, timeline: Timeline, report: CheckReport
) -> list[Instant]:
    readable = []
    for instant in timeline.instants():
        if not instant.completed:
            continue
        try:
            timeline.raw(instant)
        except DynBucketError as e:
            report.add(str(e), "as the message says; until then reads of the table fail")
            continue
        readable.append(instant)
    report.instants = len(readable)
    # Services beside the writes are pending while they run; one whose process died is
    # run again by the next write's services (or `dynbucket compact`), never rolled back.
    all_pending = timeline.pending()
    beside = left_pending(timeline)
    if beside:
        active = len(timeline.instants())
        keep_max = spec.options.keep_max_commits
        # Archival stops at the oldest pending instant; one younger than a lease, or whose
        # heartbeat beats, may be running still (the next write's services take one older
        # than that whose heartbeat expired: a killed executor's beats a while after it).
        stale = seconds_since(beside[0].id) > spec.options.lock_lease_seconds and not (
            heartbeat.is_alive(store, beside[0].id)
        )
        if active > keep_max and stale:
            report.add(
                f"instant(s) {[str(i) for i in beside]}, a service left pending, hold archival "
                f"back: {active} instants are active (hoodie.keep.max.commits={keep_max})",
                "the next write's services finish it; or run `dynbucket compact --index --clean`",
            )
        else:
            report.notes.append(
                f"instant(s) {[str(i) for i in beside]} run beside the writes (the next "
                "write's services finish one left behind; so does `dynbucket compact --index "
                "--clean`)"
            )
    unplanned = [i for i in all_pending if i.action in DETACHED_ACTIONS and i not in beside]
    pending = [i for i in all_pending if i.action not in DETACHED_ACTIONS] + unplanned
    if spec.options.optimistic:  # several writers: one whose heartbeat beats is writing
        live = [i.id for i in pending if heartbeat.is_alive(store, i.id)]
        if live:
            report.notes.append(f"instant(s) {live} are being written (their heartbeats beat)")
        pending = [i for i in pending if i.id not in live]
    if pending:
        holder = WriterLock(store).holder()
        if holder is not None:
            report.notes.append(f"instant(s) {[i.id for i in pending]} are being written: {holder}")
        else:
            report.add(
                f"instant(s) {[str(i) for i in pending]} were left pending by a writer that died",
                "run `dynbucket rollback` (the next writer does it too)",
            )
    return readable


def _files(
    store: TableStore,
    spec: TableSpec,
    timeline: Timeline,
    completed: list[Instant],
    report: CheckReport,
) -> None:
    """Files of retained completed instants (from the newest horizon of a clean, a running
    one's too): present, and each read whole. The index files
    an instant up to an adoption names are not the table's index: adoption built that
    from the rows (a dynbucket table whose ``.hoodie/.dynbucket/`` was deleted, adopted
    again, names index files that went with the folder; step 7 checks the index)."""
    horizon = cleaning_horizon(timeline)
    earliest = horizon.earliest if horizon is not None else ""
    if horizon is not None and horizon.running:
        # Its plan says its horizon before it removes a file: what it removed below it is
        # no loss (a writer killed while it ran leaves it pending: the next clean runs it).
        report.notes.append(
            f"clean {horizon.clean} is running or was left pending: files of instants before "
            f"{earliest} may be gone already"
        )
    adopted_up_to = adopted.load(store).floor
    for instant in completed:
        if instant.id < earliest:
            continue
        metadata = timeline.metadata(instant)
        _adds_up(instant, metadata, timeline, report)
        for f in metadata["files"]:
            if f["kind"] == "index" and instant.id <= adopted_up_to:
                continue
            report.files += 1
            problem = _unreadable(store, spec, f["path"])
            if problem is not None:
                report.add(
                    f"{f['path']} ({f['kind']} file of completed instant {instant.id}) {problem}",
                    "restore it from a backup",
                )


def _adds_up(instant: Instant, metadata: dict, timeline: Timeline, report: CheckReport) -> None:
    """A commit names each file once, and a rescale or rebalance wrote as many rows as it
    read (a file named twice was written by two jobs: one of them lost its rows)."""
    twice = [p for p, n in Counter(f["path"] for f in metadata["files"]).items() if n > 1]
    if twice:
        report.add(
            f"completed instant {instant.id} names {len(twice)} file(s) twice (e.g. "
            f"{twice[:2]}): two writers wrote one file, and the rows of one are lost",
            _RESTORE_INSTANT,
        )
    rows_read = metadata.get("rows-read")
    if rows_read is None or instant.action not in HUDI_ACTIONS:
        return
    stats = (timeline.raw(instant).get("partitionToWriteStats") or {}).values()
    written = sum(int(s.get("numWrites", 0)) for group in stats for s in group)
    if written != rows_read:
        report.add(
            f"completed instant {instant.id} ({metadata.get('operation')}) read "
            f"{rows_read} live rows and wrote {written}: its bucket layout lost or "
            "doubled rows",
            _RESTORE_INSTANT,
        )


def _unreadable(store: TableStore, spec: TableSpec, path: str) -> str | None:
    """Why the file at ``path`` does not read whole (None when it does)."""
    try:
        data = store.read_buffer(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"does not read ({e})"
    try:
        parsed = names.parse(path.rsplit("/", 1)[-1])
        if parsed is not None and ".log." in path:
            # A log Hudi wrote may hold corrupt blocks, which Hudi's readers skip too.
            for block in log_file.read_blocks(data, skip_corrupt=not parsed.instant):
                if block.type == log_file.PARQUET_DATA:
                    pq.ParquetFile(pa.BufferReader(block.content)).read()
                elif block.type == log_file.AVRO_DATA:
                    avro_read.read_records(
                        block.header[log_file.SCHEMA], log_file.avro_records(block)
                    )
                elif block.type == log_file.DELETE:
                    log_file.read_deletes(block)
        else:
            pq.ParquetFile(pa.BufferReader(data)).read()
    except (ValueError, OSError, pa.ArrowException, EOFError) as e:
        return f"is damaged ({str(e)[:200]})"
    return None


def _snapshot(store: TableStore, spec: TableSpec, report: CheckReport) -> pa.Table | None:
    """The latest snapshot's keys with their buckets; one file group per bucket."""
    try:
        snapshot = Snapshot(store, spec)
        adopted_files = adopted.load(store)
        for partition in snapshot.partitions():
            ids: dict[int, set[str]] = defaultdict(set)
            for f in data_files(store, partition):
                if f.instant in snapshot.visible:
                    ids[adopted_files.bucket_of(f.file_id)].add(f.file_id)
            for bucket, file_ids in sorted(ids.items()):
                if len(file_ids) > 1:
                    report.add(
                        f"bucket {bucket} of partition {partition!r} has {len(file_ids)} "
                        f"file groups ({sorted(file_ids)}); one bucket is one file group "
                        "(I4)",
                        "keep the file group the index names; move the other's "
                        "rows into it, then delete its files",
                    )
        rows = snapshot.to_arrow(columns=list(spec.record_key))
    except Exception as e:  # any failure to read is what the check reports
        report.add(
            f"the latest snapshot does not read: {type(e).__name__}: {e}", "as the message says"
        )
        return None
    report.live_rows = rows.num_rows
    return rows


def _unique(spec: TableSpec, rows: pa.Table, report: CheckReport) -> None:
    """A key is live in one partition of a scope that spans several (a global index's
    table: I2 restated); a partition's own keys are checked against the index (step 5)."""
    named = pc.unique(rows.column(PARTITION)).to_pylist()
    for scope in spec.scheme.scopes(named):
        if len(scope) < 2:
            continue
        mine = (
            rows
            if len(scope) == len(named)
            else rows.filter(pc.is_in(rows.column(PARTITION), pa.array(scope, pa.string())))
        )
        counts = pc.value_counts(record_keys(mine, spec.record_key))
        twice = counts.filter(pc.greater(counts.field("counts"), 1)).field("values").to_pylist()
        if twice:
            report.add(
                f"{len(twice)} key(s) have live rows in more than one partition (e.g. "
                f"{twice[:3]}); a key is one row {spec.scheme.unique_where} (I2)",
                "delete each such key (a delete by key takes the row the index names), then "
                "write its newest row again",
            )


def _index(
    store: TableStore,
    spec: TableSpec,
    rows: pa.Table,
    timeline: Timeline,
    completed: list[Instant],
    report: CheckReport,
) -> None:
    """The record-level index against the live rows (I6)."""
    visible = timeline.visible_of(completed)
    index = RecordLevelIndex(store, spec)
    deleted = _deletes_per_group(timeline, completed, adopted.load(store))
    live = rows.append_column(KEY, record_keys(rows, spec.record_key))
    for partition in sorted(set(index.partitions()) | set(live.column(PARTITION).to_pylist())):
        raw = index.record_index_locations(
            partition, visible, [*spec.record_key, BUCKET, FILE_ID], raw=True
        )
        report.index_entries += raw.num_rows
        where = f"partition {partition!r}"
        entries, twice = _live_entries(raw, spec)
        if twice:
            report.add(
                f"{where}: {len(twice)} key(s) have two live index entries, or a tombstone "
                f"of no live entry (e.g. {twice[:3]}); a key's entries alternate insert, "
                "tombstone (I6)",
                _REBUILD,
            )
        mine = live.filter(pc.equal(live.column(PARTITION), partition))
        at = pc.index_in(mine.column(KEY), value_set=entries.column(KEY))
        missing = mine.filter(pc.is_null(at))
        if missing.num_rows:
            report.add(
                f"{where}: {missing.num_rows} live key(s) have no index entry (e.g. "
                f"{missing.column(KEY).to_pylist()[:3]}); the next write would put "
                "them into a new bucket: a second live row",
                _REBUILD,
            )
        found = mine.filter(pc.is_valid(at))
        named = entries.take(pc.drop_null(at))
        wrong = pc.or_(
            pc.not_equal(found.column(BUCKET), named.column(BUCKET)),
            pc.not_equal(found.column(FILE_ID), named.column(FILE_ID)),
        )
        if pc.any(wrong).as_py():
            report.add(
                f"{where}: {pc.sum(wrong).as_py()} live key(s) are in another file "
                "group than their index entry names (e.g. "
                f"{found.filter(wrong).column(KEY).to_pylist()[:3]}) (I1, I6)",
                _REBUILD,
            )
        gone = entries.filter(pc.invert(pc.is_in(entries.column(KEY), value_set=mine.column(KEY))))
        for (bucket,), count in Counter(zip(gone.column(BUCKET).to_pylist())).items():
            if count > deleted.get((partition, bucket), 0):
                report.add(
                    f"{where}, bucket {bucket}: {count} index entries name keys that "
                    "have no live row, more than the file group ever deleted "
                    f"({deleted.get((partition, bucket), 0)}): entries of keys never "
                    "written",
                    _REBUILD,
                )


def _live_entries(raw: pa.Table, spec: TableSpec) -> tuple[pa.Table, list[str]]:
    """The live entries of a partition's raw index entries (each key's newest, when an
    insert) with ``_key``, and the keys whose entries do not alternate insert, tombstone."""
    raw = raw.append_column(KEY, record_keys(raw, spec.record_key))
    raw = raw.take(pc.sort_indices(raw, [(KEY, "ascending"), (INSTANT, "ascending")]))
    keys = np.asarray(raw.column(KEY).to_pylist(), dtype=object)
    deletes = raw.column(OP).to_numpy() == DELETE
    first = np.ones(len(keys), np.bool_)
    first[1:] = keys[1:] != keys[:-1]
    last = np.ones(len(keys), np.bool_)
    last[:-1] = first[1:]
    # A key's first entry is an insert, and each later one does the other thing.
    wrong = np.where(first, deletes, np.r_[False, deletes[1:] == deletes[:-1]])
    twice = sorted(set(keys[wrong].tolist()))
    return raw.filter(pa.array(last & ~deletes)), twice


def _layout(store: TableStore, spec: TableSpec, rows: pa.Table, report: CheckReport) -> None:
    """Stateless schemes: every live key sits in the bucket its partition's layout computes
    (I1 for a scheme whose bucket is a function of the key)."""
    layouts = Snapshot(store, spec).layouts()
    keyed = rows.append_column(HASH, pa.array(key_hashes(rows, spec.record_key)))
    for partition in pc.unique(keyed.column(PARTITION)).to_pylist():
        mine = keyed.filter(pc.equal(keyed.column(PARTITION), partition))
        wrong = mine.column(BUCKET).to_numpy() != layouts.locate(partition, mine)
        if wrong.any():
            keys = record_keys(mine.filter(pa.array(wrong)), spec.record_key).to_pylist()
            report.add(
                f"partition {partition!r}: {int(wrong.sum())} live key(s) are not in "
                f"the bucket the {spec.scheme.name} layout puts them in (e.g. "
                f"{keys[:3]}): writes and lookups will not find them (I1)",
                "restore the partition and .hoodie/.dynbucket/buckets/ from a backup "
                "of the same time",
            )


_RESTORE_INSTANT = (
    "restore the table from a backup taken before that instant (its earlier "
    "file slices may still hold the rows: time travel to the instant before "
    "it reads them)"
)
_REBUILD = (
    "the index disagrees with the data: restore .hoodie/.dynbucket/rli/ from a backup "
    "of the same time as the data"
)


def _deletes_per_group(
    timeline: Timeline, completed: list[Instant], adopted_files: adopted.Adopted
) -> dict[tuple[str, int], int]:
    """(partition, bucket) -> delete records the commits ever wrote into its file group."""
    out: Counter[tuple[str, int]] = Counter()
    for group, n in timeline.archived().deletes.items():
        partition, _, file_id = group.rpartition("/")
        out[(partition, adopted_files.bucket_of(file_id))] += n
    for instant in completed:
        if instant.action not in HUDI_ACTIONS:
            continue
        for partition, stats in (timeline.raw(instant).get("partitionToWriteStats") or {}).items():
            for stat in stats:
                out[(partition, adopted_files.bucket_of(stat["fileId"]))] += int(
                    stat.get("numDeletes", 0)
                )
    return dict(out)


def _archived(timeline: Timeline) -> tuple[str, frozenset[str]]:
    archived = timeline.archived()
    return archived.floor, archived.rolled_back


def _orphans(store: TableStore, timeline: Timeline, report: CheckReport) -> None:
    """Data and index files of instants the timeline does not have."""
    # Archived instants were completed (``Visible``): their files are the table's.
    known = Visible({i.id for i in timeline.instants()}, *_archived(timeline))
    strays: dict[str, list[str]] = defaultdict(list)
    index_dir = store.path(RLI_DIR) + "/"
    adopted_logs = adopted.load(store).logs
    hoodie = store.path(HOODIE_DIR) + "/"
    for info in store.walk(store.root):
        if info.path.startswith(hoodie) and not info.path.startswith(index_dir):
            continue  # the metadata table's files (and those adoption set aside)
        parsed = names.parse(info.base_name)
        if parsed is not None:
            instant: str | None = parsed.instant or adopted_logs.get(
                info.base_name, "(none: Hudi wrote it after the adoption)"
            )
        elif info.path.startswith(index_dir):
            instant = index_instant(info.base_name)
        else:
            continue
        if instant is not None and instant not in known:
            strays[instant].append(info.path)
    for instant, paths in sorted(strays.items()):
        decided = outcome.read(store, instant)
        if decided is not None and decided.state == outcome.ROLLED_BACK:
            # Written after its rollback by a stalled process: never read; a clean goes.
            report.notes.append(
                f"{len(paths)} file(s) of instant {instant}, which was rolled back, were "
                "written after its rollback by a process that stalled; nothing reads them, "
                "and the next clean removes them"
            )
            continue
        report.add(
            f"{len(paths)} file(s) of instant {instant}, which is not on the timeline "
            f"(e.g. {json.dumps(paths[:2])}): its metadata was lost, or a writer left "
            f"them",
            f"if instant {instant} was committed, restore its file under "
            ".hoodie/ from a backup; if not, delete these files",
        )


def _metadata_table(
    store: TableStore,
    spec: TableSpec,
    timeline: Timeline,
    rows: pa.Table | None,
    report: CheckReport,
) -> None:
    """Step 7 (module doc)."""
    mdt = MetadataTable(store)
    if rows is not None and RECORD_INDEX in metadata_partitions.partitions(store):
        _metadata_record_index(mdt, spec, rows, report)
    listing = mdt.listing()
    visible = timeline.visible()
    replaced = adopted.load(store).replaced
    hoodie = store.path(HOODIE_DIR) + "/"
    folders = {
        posixpath.relpath(posixpath.dirname(i.path), store.root)
        for i in store.walk(store.root)
        if i.base_name == names.PARTITION_METADATA and not i.path.startswith(hoodie)
    }
    stored_partitions = {"" if f == "." else f for f in folders}
    for partition in sorted(stored_partitions | set(listing)):
        stored = {f.name: f.size for f in data_files(store, partition) if f.instant in visible}
        if replaced:  # a group Hudi's replace commit replaced stays listed until cleaned
            stored |= _replaced_files(store, partition, replaced)
        listed = listing.get(partition, {})
        unlisted, gone, sized = differences(stored, listed)
        for problem, found in (
            ("not listed in the metadata table (Hudi's readers do not read them)", unlisted),
            ("listed in the metadata table but not stored (Hudi's readers fail on them)", gone),
            ("listed in the metadata table with another size", sized),
        ):
            if found:
                report.add(
                    f"partition {partition or '(none)'}: {len(found)} data file(s) {problem}, "
                    f"e.g. {json.dumps(found[:2])}",
                    "restore .hoodie/metadata/ and the partition's files from the same backup; "
                    "a file no instant wrote (a copy) can be deleted",
                )


def _replaced_files(store: TableStore, partition: str, replaced: frozenset[str]) -> dict[str, int]:
    """The files of a partition's groups that a replace commit of Hudi's replaced."""
    out = {}
    for info in store.list_files(store.path(partition)):
        parsed = names.parse(info.base_name)
        if parsed is not None and parsed.file_id in replaced:
            out[info.base_name] = int(info.size or 0)
    return out


def _metadata_record_index(
    mdt: MetadataTable, spec: TableSpec, rows: pa.Table, report: CheckReport
) -> None:
    """Step 7's record index: each live key at its row's partition and file group (in the
    partitioned layout, each (partition, key)); the global layout holds a key once."""
    keys = record_keys(rows, spec.record_key)
    live = pa.table(
        {"key": keys, "partition": rows.column(PARTITION), "file_id": rows.column(FILE_ID)}
    )
    partitioned = mdt.partitioned()
    if not partitioned:
        counts = pc.value_counts(keys)
        twice = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
        if len(twice):
            report.add(
                f"{len(twice)} key(s) live in more than one partition, e.g. "
                f"{json.dumps(sorted(twice.to_pylist())[:3])}, in a table whose metadata "
                "table's record index has the global layout, which holds one location per key",
                "deduplicate the keys across partitions, or keep each key in one partition",
            )
    found = disagreement(live, mdt.record_index_table(), partitioned)
    for problem, keys_found in (
        ("live key(s) missing from the metadata table's record index", found.missing),
        ("key(s) in the metadata table's record index without a live row", found.extra),
        ("key(s) the metadata table's record index places elsewhere than their row", found.moved),
    ):
        if keys_found:
            report.add(
                f"{len(keys_found)} {problem}, e.g. {json.dumps(keys_found[:3])} (Hudi's "
                "readers and writers that look keys up there get them wrong)",
                "restore .hoodie/metadata/ and the table's files from the same backup",
            )


#: What ``differences`` compares by: names, or (partition, key)s.
_Key = TypeVar("_Key", str, tuple[str, str])


def differences(
    ours: Mapping[_Key, Any], theirs: Mapping[_Key, Any]
) -> tuple[list[_Key], list[_Key], list[_Key]]:
    """(keys only in ``ours``, keys only in ``theirs``, keys whose values differ), sorted."""
    both = ours.keys() & theirs.keys()
    return (
        sorted(ours.keys() - theirs.keys()),
        sorted(theirs.keys() - ours.keys()),
        sorted(k for k in both if ours[k] != theirs[k]),
    )
