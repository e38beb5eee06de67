"""What a write must not commit over: the instants other writers completed while it wrote.

Several writers (``hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL``) write
beside each other; each commit checks its instant against every instant that completed
since it began (not in its ``visible`` set: first without the table's lease, then under it
for those that completed in between) and is refused with
:class:`WriteConflictError` when one of them changed what it decided from. The write is then
run again from the table as it is (``write/writer.py``). Merge-on-read updates of known keys
never conflict: each writer appends its own log, and logs merge by ordering value.

1. A concurrent rescale or rebalance (it moved keys), a schema another writer committed,
   the same stream's micro-batch: conflict.
2. File groups: a group both wrote, where either wrote a base file (a copy-on-write rewrite,
   or a new group for the same bucket: I4), or a group whose slices a concurrent compaction
   or log compaction rewrote while this write put a log on it: conflict. Except a
   compaction that wrote the group's new base and is older than this write (planned
   before it began), or was planned while it was written (it left this write's log out
   and kept a log version for it: its plan's ``writing``): this write's log goes onto the
   new slice at its commit (``Checked.carry``, ``file_group/carry.py``). And except a log
   compaction older than this write: its merged log sorts before this write's log and
   restates none of this write's instants (``_after``).
3. New keys (I2): a key both inserted (in one partition; anywhere with a global index), or
   both deleted; and capacity (I3): a bucket both put new keys in (each filled its room
   from the same count).
4. Deletes (I6): a key one deleted and the other wrote (a delete carries no ordering value,
   and the index would hold a tombstone for a live row or an entry for a deleted one); read
   from the data files of the groups concerned only.
5. Archival moved an instant off the timeline that this write never saw: it cannot be
   checked, so it conflicts.
6. A log compaction or index compaction younger than this instant (planned after it
   began), pending or completed: readers skip what it restates by instant range (a merged
   log, a merged index delta), and its planner never saw this instant's log or index
   delta in that range: conflict (written again, the write's new instant is younger than
   the service's). Except an index compaction whose range of a partition ends at or
   before this instant (it restates the instants before the oldest write pending when it
   was planned: ``index/file_names.py``). A compaction younger than this instant left it
   out (step 2): pending, its finish carries this write's log.
7. A partial upsert (commit metadata ``partial-fields``) filled the fields its records lack
   from the rows it read: a key another writer wrote meanwhile would get those fields back
   as they were, silently undoing that write: conflict (read from the data files of the
   groups both wrote only).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.base.columns import BUCKET, DELETE, HASH, OP
from dynbucket.base.errors import TableCorruptedError, WriteConflictError
from dynbucket.format.file_group.merge import KEY, read_base, read_log
from dynbucket.format.file_group.slices import DataFile
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.commit import extra_of
from dynbucket.format.hudi.files import bucket_of, is_bucket_file_id
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.index.rli import delta_entries
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import RLI_DIR
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import COMPACTIONS, Action
from dynbucket.format.timeline.lanes import Lanes, lane_of
from dynbucket.format.timeline.timeline import Instant, Timeline, compaction_writing
from dynbucket.format.timeline.written import WrittenFile


class Transaction(Protocol):
    """What the checks read of the ``transaction.Transaction`` committing (which imports
    this module)."""

    store: TableStore
    spec: TableSpec
    files: list[WrittenFile]
    visible: frozenset[str]
    unseen_from: str | None
    writer_lanes: Lanes | None

    @property
    def id(self) -> str: ...


#: Operations that move keys between file groups: nothing commits beside them.
_MOVING = ("rescale", "rebalance")

Group = tuple[str, Any]
"""(partition, bucket id), or (partition, file id) for a group whose id names no bucket."""


def group_of(partition: str, file_id: str) -> Group:
    return (partition, bucket_of(file_id) if is_bucket_file_id(file_id) else file_id)


@dataclass
class Footprint:
    """What one instant wrote, as the checks compare it."""

    bases: set[Group] = field(default_factory=set)
    logs: set[Group] = field(default_factory=set)
    data: dict[Group, list[DataFile]] = field(default_factory=dict)
    inserts: dict[str, np.ndarray] = field(default_factory=dict)
    """Partition ('' with a global index) -> hashes of the keys it inserted (sorted,
    unique: two writes' tens of thousands of keys intersect as arrays, not Python sets)."""
    tombstones: dict[str, np.ndarray] = field(default_factory=dict)
    filled: set[Group] = field(default_factory=set)
    """Groups that gained new keys (by bucket)."""
    deleted: dict[Group, set[str]] = field(default_factory=dict)
    """Group -> record keys it deleted."""
    indexed: set[str] = field(default_factory=set)
    """Partitions it wrote index entries of."""

    def add_data(self, partition: str, f: DataFile) -> None:
        group = group_of(partition, f.file_id)
        (self.logs if f.kind == "log" else self.bases).add(group)
        self.data.setdefault(group, []).append(f)

    def add_index(
        self,
        spec: TableSpec,
        partition: str,
        path: str,
        store: Any,
        written: pa.Table | None = None,
    ) -> None:
        """Adds the index file ``path`` (``written``: its entries, in memory already)."""
        self.indexed.add(partition)
        entries = written
        if entries is None:
            entries = delta_entries(store, spec, path, [HASH, BUCKET, OP])
        if not entries.num_rows:
            return
        scope = spec.scheme.key_scope(partition)
        ops = entries.column(OP).to_numpy(zero_copy_only=False)
        hashes = entries.column(HASH).to_numpy()
        buckets = entries.column(BUCKET).to_numpy()
        gone = ops == DELETE
        for into, picked in ((self.inserts, hashes[~gone]), (self.tombstones, hashes[gone])):
            into[scope] = np.union1d(into.get(scope, picked[:0]), picked)
        self.filled.update((partition, int(b)) for b in np.unique(buckets[~gone]))
        if not gone.any():
            return
        # Only a delete's record key is compared (step 4): read for the deletes alone.
        keys_of = list(spec.record_key)
        keyed = (
            written
            if written is not None
            else pq.read_table(path, columns=keys_of, filesystem=store.fs)
        )
        keys = record_keys(keyed.select(keys_of).filter(pa.array(gone)), keys_of).to_pylist()
        for b, k in zip(buckets[gone].tolist(), keys, strict=True):
            self.deleted.setdefault((partition, int(b)), set()).add(k)


@dataclass(frozen=True)
class Checked:
    """What :func:`check` found no conflict with."""

    writes: list[str]
    """The data writes completed since the write began (its caches miss their keys)."""
    completed: frozenset[str]
    """Every instant completed since it began that was checked (a later check skips them:
    a completed instant never changes)."""
    carry: dict[tuple[str, str], DataFile] = field(default_factory=dict)
    """(partition, file id) -> the base a compaction completed since the write began: the
    write's logs there go onto that base's slice (``file_group/carry.py``)."""
    slots: dict[tuple[str, str], int] = field(default_factory=dict)
    """Of ``carry``, the groups whose compaction was planned while this write was written:
    the log version its slice keeps for this write."""
    footprint: Footprint | None = None
    """What the write wrote, when the check needed it (``own_footprint``: a check with
    nothing completed or pending beside the write makes none; one alone on its table never
    does)."""


def check(
    tx: Transaction,
    timeline: Timeline,
    metadata: dict[str, Any],
    mine: Footprint | None = None,
    checked: frozenset[str] = frozenset(),
) -> Checked:
    """Raises :class:`WriteConflictError` if ``tx`` conflicts with an instant completed since
    it began (the module doc's steps). ``mine``: ``own_footprint(tx)``, when made already;
    ``checked``: instants an earlier check of ``tx`` found no conflict with (the commit
    checks once before it takes the lease and again under it, for what completed since:
    the lease is held for the few instants in between, not the whole check)."""
    listed = timeline.instants()  # one listing: what completed and what is pending, together
    theirs = [i for i in listed if i.completed and i.id not in tx.visible and i.id != tx.id]
    done = Checked(
        [i.id for i in theirs if i.action == Action.COMMIT], frozenset(i.id for i in theirs)
    )
    theirs = [i for i in theirs if i.id not in checked]
    # 5.
    floor = timeline.archived().floor
    if tx.unseen_from is not None and floor and floor >= tx.unseen_from:
        _refuse(tx, floor, "archival moved instants this write never saw off the timeline")
    younger = [i for i in listed if not i.completed and i.id > tx.id]
    if not theirs and not younger:
        return done
    mine = mine if mine is not None else own_footprint(tx)
    done = replace(done, footprint=mine)
    for instant in theirs:
        if instant.action in COMPACTIONS:
            rewritten = _footprint(tx, timeline, instant, with_index=False)
            both = mine.logs & (rewritten.bases | rewritten.logs)
            if instant.action == Action.LOG_COMPACTION and instant.id < tx.id:
                both = {g for g in both if not _after(mine.data[g], rewritten.data[g])}
            if both and not _carried(tx, timeline, instant, both, rewritten, mine, done):
                why = f"it rewrote file group(s) {_few(both)} this write logged to"
                _refuse(tx, instant.id, why)
        elif instant.action == Action.INDEX_COMPACTION and instant.id > tx.id:
            done_ = timeline.metadata(instant)
            merged = {f.get("partition", "") for f in done_.get("files") or []}
            _refuse_index(tx, instant, mine, merged, done_.get("until") or {})
        elif instant.action == Action.COMMIT:
            _check_write(tx, timeline, instant, mine, metadata)
    # 6.
    for instant in younger:
        plan = timeline.plan(instant)
        if instant.action in COMPACTIONS:
            planned = {group_of(g[0], g[1]) for g in plan.get("groups", [])}
            # A compaction planned while this write was written keeps its log out and
            # carries it (its finisher, or this commit once it completed).
            if instant.action == Action.COMPACTION and tx.id in compaction_writing(
                timeline, instant
            ):
                continue
            if both := mine.logs & planned:
                why = (
                    f"its {instant.action} plans file group(s) {_few(both)} without "
                    "this write's log there"
                )
                _refuse(tx, instant.id, why)
        elif instant.action == Action.INDEX_COMPACTION:
            merged = set(plan.get("partitions") or []) | set(plan.get("merges") or {})
            _refuse_index(tx, instant, mine, merged, plan.get("until") or {})
    return done


def _after(logs: list[DataFile], merged: list[DataFile]) -> bool:
    """Whether a write's ``logs`` in a group sort after the ``merged`` logs a log
    compaction planned before the write began wrote there, in Hudi's order of a slice's
    logs (the instant the name carries, the version, then the writer's instant its token
    carries): then readers apply the write's records after the merged ones, and the merged
    log restates no instant of the write's (its range ends at its own instant, older). A
    write that began after the plan is younger than it, so its logs always do: from table
    version 8 on by the instant the name carries (its own), on version 6 by the version or,
    the same version (the merged log is not visible while pending), by the token."""

    mine, theirs = _log_order(logs), _log_order(merged)
    return bool(mine and theirs) and min(mine) > max(theirs)


def _log_order(logs: list[DataFile]) -> list[tuple[str, int, str]]:
    """Each log's place in Hudi's order of its slice (none: a name that does not say)."""
    out = []
    for f in logs:
        parsed = names.parse(posixpath.basename(f.path))
        if parsed is None or parsed.kind != "log" or not parsed.instant:
            return []
        out.append((parsed.base_instant, parsed.version, parsed.instant))
    return out


def _carried(
    tx: Transaction,
    timeline: Timeline,
    instant: Instant,
    groups: set[Group],
    rewritten: Footprint,
    mine: Footprint,
    done: Checked,
) -> bool:
    """Whether this write's logs on ``groups`` can go onto the new slices of the compaction
    ``instant`` (noted in ``done.carry``): a compaction (not a log compaction: its merged
    log restates logs by instant range) older than the write, or planned while it was
    written (it left this write's log out and kept a version for it on its slices:
    ``done.slots``), one new base per group, each group carried once (two compactions
    beside: written again)."""
    if instant.action != Action.COMPACTION:
        return False
    slot = 0
    if instant.id > tx.id:
        writing = compaction_writing(timeline, instant)
        if tx.id not in writing:
            return False
        slot = writing.index(tx.id) + 1
    carry = done.carry
    found: dict[tuple[str, str], DataFile] = {}
    for group in groups:
        bases = [f for f in rewritten.data.get(group, []) if f.kind == "base"]
        logs = {f.file_id for f in mine.data.get(group, []) if f.kind == "log"}
        if len(bases) != 1 or logs != {bases[0].file_id}:
            return False
        key = (group[0], bases[0].file_id)
        if key in carry:
            return False
        found[key] = bases[0]
    carry.update(found)
    if slot:
        done.slots.update(dict.fromkeys(found, slot))
    return True


def _refuse_index(
    tx: Transaction, instant: Instant, mine: Footprint, merged: set[str], until: dict[str, str]
) -> None:
    """Refuses a write whose index deltas an index compaction restated without them: of
    the partitions it merged, those it restated up to past this write (a partition's
    ``until``, the oldest write pending at its planning: this write's delta, from it on,
    stays after the merged file)."""
    merged = {p for p in merged if not (until.get(p) and until[p] <= tx.id)}
    if both := mine.indexed & merged:
        why = f"it merges the index of {_few(both)} without this write's entries"
        _refuse(tx, instant.id, why)


def _check_write(
    tx: Transaction, timeline: Timeline, instant: Instant, mine: Footprint, metadata: dict[str, Any]
) -> None:
    doc = timeline.raw(instant)
    extra = extra_of(doc)
    if tx.writer_lanes is not None and (lane := lane_of(extra)) is not None:
        tx.writer_lanes.saw(*lane)
    # 1.
    if extra.get("operation") in _MOVING:
        _refuse(tx, instant.id, f"a {extra['operation']} moved keys between file groups")
    schema = (doc.get("extraMetadata") or {}).get("schema")
    if schema and schema != tx.spec.avro_schema():
        _refuse(tx, instant.id, "it committed another schema")
    stream, other = metadata.get("stream"), extra.get("stream")
    if stream and other and other.get("id") == stream["id"] and other["batch"] >= stream["batch"]:
        _refuse(tx, instant.id, f"it committed batch {other['batch']} of stream {stream['id']}")
    their = _footprint(tx, timeline, instant, with_index=True)
    # 2.
    rewritten = (mine.bases & (their.bases | their.logs)) | (their.bases & mine.logs)
    if rewritten:
        _refuse(tx, instant.id, f"both wrote file group(s) {_few(rewritten)}, one a base file")
    # 3.
    for what, a, b in (
        ("inserted", mine.inserts, their.inserts),
        ("deleted", mine.tombstones, their.tombstones),
    ):
        for scope, hashes in a.items():
            if scope in b and len(both := np.intersect1d(hashes, b[scope], True)):
                _refuse(tx, instant.id, f"both {what} {len(both)} key(s)")
    if filled := mine.filled & their.filled:
        _refuse(tx, instant.id, f"both put new keys into bucket(s) {_few(filled)}")
    # 4.
    for deleter, writer in ((their, mine), (mine, their)):
        for group, keys in deleter.deleted.items():
            try:
                written = _keys_written(tx, writer.data.get(group, []))
            except (FileNotFoundError, TableCorruptedError):
                _refuse(tx, instant.id, f"a file it wrote in {group} was cleaned: not checkable")
            if hit := keys & written:
                _refuse(tx, instant.id, f"one deleted key(s) {_few(hit)} the other wrote")
    # 7.
    if metadata.get("partial-fields"):
        for group in mine.data.keys() & their.data.keys():
            try:
                hit = _keys_written(tx, mine.data[group]) & _keys_written(tx, their.data[group])
            except (FileNotFoundError, TableCorruptedError):
                _refuse(tx, instant.id, f"a file it wrote in {group} was cleaned: not checkable")
            if hit:
                why = f"this partial upsert kept fields of key(s) {_few(hit)} it wrote meanwhile"
                _refuse(tx, instant.id, why)


def own_footprint(tx: Transaction) -> Footprint:
    """What ``tx`` wrote (its own files: made once per commit, before the lease)."""
    out = Footprint()
    for f in tx.files:
        if f.kind == "index":
            out.add_index(tx.spec, f.partition, f.path, tx.store, f.entries)
        else:
            out.add_data(f.partition, DataFile(tx.id, f.path, f.kind, f.size, f.file_id))
    return out


def _footprint(
    tx: Transaction, timeline: Timeline, instant: Instant, with_index: bool
) -> Footprint:
    out = Footprint()
    doc = timeline.raw(instant)
    for partition, stats in (doc.get("partitionToWriteStats") or {}).items():
        for stat in stats:
            path = stat.get("path")
            if not path:
                continue
            is_log = stat.get("logFiles") or posixpath.basename(path).startswith(".")
            kind = "log" if is_log else "base"
            size = int(stat.get("fileSizeInBytes") or 0)
            f = DataFile(instant.id, tx.store.path(path), kind, size, stat.get("fileId", ""))
            out.add_data(partition or "", f)
    if with_index:
        rli = tx.store.path(RLI_DIR) + "/"
        for path in extra_of(doc).get("index-files", []):
            full = tx.store.path(path)
            partition = posixpath.dirname(full[len(rli) :])
            try:
                out.add_index(tx.spec, partition, full, tx.store)
            except FileNotFoundError:  # merged and cleaned since: not checkable
                _refuse(tx, instant.id, f"its index entries of {partition} were cleaned")
    return out


def _keys_written(tx: Transaction, files: Iterable[DataFile]) -> set[str]:
    """Record keys of ``files`` (their data and delete records)."""
    out: set[str] = set()
    for f in files:
        if f.kind == "log":
            rows = read_log(tx.store, tx.spec, f, list(tx.spec.record_key))
            out.update(rows.column(KEY).to_pylist())
        else:
            rows = read_base(tx.store, tx.spec, f, list(tx.spec.record_key))
            out.update(record_keys(rows, tx.spec.record_key).to_pylist())
    return out


def _few(items: Iterable[Any]) -> str:
    shown = sorted(items, key=str)
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return ", ".join(map(str, shown[:3])) + more


def _refuse(tx: Transaction, other: str, why: str) -> None:
    raise WriteConflictError(
        f"instant {tx.id} of {tx.store.uri} conflicts with instant {other}, which another "
        f"writer completed while it was written: {why}; nothing of it is committed (the "
        "write runs again from the table as it is, concurrency.conflict-retries times)"
    )
