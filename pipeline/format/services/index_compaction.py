"""Index compaction: a partition's record-level index files merged, as an instant of its
own (``index.compaction.*``). dynbucket's own service: Hudi compacts its record index
inside its metadata table."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dynbucket.format.file_group.slices import unmerged
from dynbucket.format.index.file_names import index_files
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.services.compaction import merge_run
from dynbucket.format.services.service import (
    Scope,
    Service,
    ServiceResult,
    merge_is_moot,
    resume,
    run_now,
)
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Instant, Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile
from dynbucket.format.timeline.transaction import schedule as schedule_instant


@dataclass(frozen=True)
class IndexPlan:
    """An index compaction's plan: partitions whose index files merge whole into one base
    file, and runs of deltas (by partition, their file names) merged into one delta; and
    per partition the instant before which it restates (``until``: the oldest write
    pending at planning, whose delta and those after it stay beside the merged file)."""

    partitions: tuple[str, ...] = ()
    merges: Mapping[str, list[str]] = field(default_factory=dict)
    until: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, plan: Mapping[str, Any]) -> IndexPlan:
        """The plan as the timeline recorded it (``Timeline.plan``)."""
        return cls(
            tuple(plan.get("partitions", [])),
            dict(plan.get("merges", {})),
            dict(plan.get("until", {})),
        )

    def entries(self) -> dict[str, Any]:
        """The plan's entries as the timeline records them."""
        return {
            "partitions": list(self.partitions),
            "merges": dict(self.merges),
            "until": dict(self.until),
        }

    def reads(self, store: TableStore) -> int:
        """Bytes of the index files executing it reads."""
        merged = {n for names in self.merges.values() for n in names}
        read = sum(f.size for p in self.partitions for f in index_files(store, p))
        read += sum(f.size for p in self.merges for f in index_files(store, p) if f.name in merged)
        return read


def compact_index(
    store: TableStore,
    spec: TableSpec,
    min_files: int | None = None,
    partitions: Sequence[str] | None = None,
    by_size: bool = False,
) -> ServiceResult:
    """Merges a partition's index files into one once it has ``min_files`` of them (of
    ``partitions``; default all), now: scheduled and executed at once (one a process that
    died left pending first). ``by_size``: as :func:`schedule_index_compaction`."""
    scope = Scope(tuple(partitions) if partitions else None, by_size, min_files=min_files)
    return run_now(IndexCompaction(), store, spec, scope)


def schedule_index_compaction(
    store: TableStore,
    spec: TableSpec,
    min_files: int | None = None,
    partitions: Sequence[str] | None = None,
    by_size: bool = False,
    seen: dict[str, int] | None = None,
) -> str | None:
    """Plans an index compaction of the partitions (of ``partitions``; default all) with
    at least ``min_files`` index files, under the lease, and leaves it pending for
    :func:`execute_index_compaction`, which needs no lease: as a compaction does
    (``compaction.py``), it writes only files of its own instant and moves no key, and
    writes meanwhile add index files of later instants. ``by_size``: a partition whose
    deltas are under ``index.compaction.delta-size-ratio`` of its base has a run of its
    newest deltas merged into one (``compaction.merge_run``; its plan names them), not its
    whole index rewritten, so the work per write does not grow with the partition.
    Returns its instant (None: nothing to merge; partitions are looked at before the lease
    is taken, and ``seen`` gets each one's count of index files)."""
    threshold = min_files or spec.options.index_compaction_min_files
    ratio = spec.options.index_compaction_delta_ratio
    index = RecordLevelIndex(store, spec)

    def due(partition: str, visible: Collection[str]) -> bool:
        base, deltas = index.files(partition, visible)
        files = len(unmerged(deltas)) + (base is not None)
        if seen is not None:
            seen[partition] = files
        return files >= threshold

    visible = Timeline(store, spec.options.merge_on_read).visible()
    wanted = [p for p in (partitions or index.partitions()) if due(p, visible)]
    if not wanted:
        return None

    def plan(txn: Transaction) -> dict[str, Any] | None:
        pending = txn.timeline.pending()
        if any(i.action == Action.INDEX_COMPACTION and i.id != txn.id for i in pending):
            return None
        # 1. The oldest write pending: its delta, and every one after it, stays beside.
        writing = min(
            (i.id for i in pending if i.action == Action.COMMIT and i.id < txn.id), default=""
        )
        whole, merges, until = [], {}, {}
        for p in (p for p in wanted if due(p, txn.visible)):
            base, deltas = index.files(p, txn.visible)
            # 2. Never before what the partition's base restates already.
            end = max(writing, base.restates_until) if writing and base else writing
            if end:
                deltas = [f for f in deltas if f.instant < end]
                if len(deltas) + (base is not None) < 2:
                    continue
                until[p] = end
            # 3. The whole index, or a run of its newest deltas.
            if not by_size or base is None or sum(f.size for f in deltas) >= ratio * base.size:
                whole.append(p)
            else:
                merges[p] = [f.name for f in merge_run(deltas, threshold)]
        if not whole and not merges:
            return None
        return IndexPlan(tuple(whole), merges, until).entries()

    return schedule_instant(store, spec, Action.INDEX_COMPACTION, "compact-index", plan)


def execute_index_compaction(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Executes the pending index compaction ``instant`` and completes it: each planned
    partition's index files older than it merged into one base file of it, or the planned
    run of its deltas into one merged delta."""
    timeline = Timeline(store, spec.options.merge_on_read)
    txn = resume(store, spec, instant, Action.INDEX_COMPACTION, "index-compactor")
    planned = IndexPlan.of(txn.plan)
    visible = timeline.visible(as_of=instant)
    index = RecordLevelIndex(store, spec)
    for partition in planned.partitions:
        merged = index.compact(partition, instant, visible, planned.until.get(partition, ""))
        if merged is not None:
            txn.add(WrittenFile(partition, merged.path, "index", 0, merged.size))
    for partition, names_ in planned.merges.items():
        by_name = {f.name: f for f in index_files(store, partition)}
        if merge_is_moot("index compaction", instant, partition, names_, by_name):
            continue
        run = [by_name[n] for n in names_]
        merged = index.merge_deltas(partition, instant, run, planned.until.get(partition, ""))
        txn.add(WrittenFile(partition, merged.path, "index", 0, merged.size))
    written = len(txn.files)
    txn.commit({"partitions": written, "until": dict(planned.until)})
    return ServiceResult(Action.INDEX_COMPACTION, txn.id, written)


class IndexCompaction(Service):
    """Index compaction: completed in ``execute`` (it writes only files of its own instant
    and moves no key)."""

    action = Action.INDEX_COMPACTION

    def automatic(self, spec: TableSpec) -> bool:
        return spec.options.index_compaction_automatic

    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        """The partitions the write added index files to (each is looked at; it is
        compacted once it has ``index.compaction.min-files``)."""
        partitions = tuple(sorted({f.partition for f in files if f.kind == "index"}))
        return Scope(partitions, automatic=True) if partitions else None

    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        return schedule_index_compaction(
            store, spec, scope.min_files, scope.partitions, scope.automatic, scope.seen
        )

    def execute(self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> Any:
        return execute_index_compaction(store, spec, instant)

    def reads_bytes(self, store: TableStore, timeline: Timeline, found: Instant) -> int:
        return IndexPlan.of(timeline.plan(found)).reads(store)
