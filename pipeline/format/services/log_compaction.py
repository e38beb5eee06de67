"""Log compaction (Hudi's ``logcompaction``): a slice's logs merged into one log.

A log compaction (the merged log: ``file_group/merged_log.py``) merges a
slice's logs into one log, without its base: its cost is the logs', not the group's. The
automatic services compact a slice into a new base once its logs reach
``compaction.log-size-ratio`` of its base (``full_due``), and merge its logs otherwise: a
group's base is rewritten once per that fraction of its size written to it, so the work
per write stays flat as groups grow, and a slice never holds more than a few logs. A log
compaction is scheduled the same way (its plan names each slice's logs and the merged
log's name), executed without the lease and completed without it (it moves no log: the
logs written meanwhile come after the merged one, which sorts before them), as a delta
commit. Its instant is newer than every log it merges and older than every log written
after it was planned (writes hold the lease), which is how readers tell them apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from dynbucket.base.errors import InstantNotFoundError
from dynbucket.format.file_group.merged_log import mergeable, write_merged_log
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi.files import log_name
from dynbucket.format.services.compaction import (
    due_scope,
    due_slices,
    merge_run,
    planned_already,
    slices_compacted_automatically,
)
from dynbucket.format.services.service import (
    Scope,
    Service,
    ServiceResult,
    merge_is_moot,
    resume,
)
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Instant
from dynbucket.format.timeline.transaction import Transaction, WrittenFile
from dynbucket.format.timeline.transaction import schedule as schedule_instant

log = logging.getLogger(__name__)


class MergedLog(NamedTuple):
    """A log compaction's plan of one file group (recorded as a list, in this order)."""

    partition: str
    file_id: str
    base_instant: str
    """The base instant of the slice whose logs it merges."""
    logs: list[str]
    """The names of the logs it merges (``merge_run``), oldest first."""
    merged: str
    """The merged log's name: the slice's next log, of the log compaction's instant."""


def schedule_log(
    store: TableStore,
    spec: TableSpec,
    min_logs: int,
    partitions: Sequence[str] | None = None,
    max_bytes: int | None = None,
) -> str | None:
    """Plans a log compaction of the slices with at least ``min_logs`` logs that
    :func:`full_due` leaves to one (as :func:`schedule` picks them); returns its instant
    (None: nothing to merge, or log compaction is off). Each group's plan names the logs
    it merges (:func:`merge_run`) and the merged log: the slice's next log, of this
    instant, saying the first merged log's instant."""
    if not (spec.options.log_compaction_enable and mergeable(spec)):
        return None

    def plan(txn: Transaction) -> dict[str, Any] | None:
        groups = []
        for r in due_slices(txn, store, spec, max(2, min_logs), partitions, max_bytes, False):
            run = merge_run(r.slice.logs, max(2, min_logs))
            base_instant, version = r.slice.next_log(txn.id, spec.table_version)
            merged = log_name(r.slice.file_id, base_instant, version, txn.id, run[0].instant)
            logs = [f.name for f in run]
            groups.append(
                MergedLog(r.partition, r.slice.file_id, r.slice.base_instant, logs, merged)
            )
        return {"groups": [list(g) for g in groups]} if groups else None

    return schedule_instant(store, spec, Action.LOG_COMPACTION, "logcompact", plan)


def run_log(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Executes the pending log compaction ``instant`` and completes it (no lease: its
    merged logs are files only it writes, and it moves no log). Already completed (another
    executor finished it): nothing is done."""
    try:
        txn = resume(store, spec, instant, Action.LOG_COMPACTION, "log-compactor")
    except InstantNotFoundError:
        return ServiceResult(Action.LOG_COMPACTION, None)
    groups = [MergedLog(*g) for g in txn.plan.get("groups", [])]
    listed = {p: data_files(store, p) for p in dict.fromkeys(g.partition for g in groups)}
    for partition, file_id, base_instant, logs, merged in groups:
        by_name = {f.name: f for f in listed[partition] if f.file_id == file_id}
        if merge_is_moot("log compaction", instant, partition, logs, by_name):
            continue
        base = next(
            (f.name for f in by_name.values() if f.kind == "base" and f.instant == base_instant), ""
        )
        txn.add(
            write_merged_log(
                store, spec, partition, file_id, merged, [by_name[n] for n in logs], base
            )
        )
    txn.commit({"merged-slices": len(groups), "merged-logs": sum(len(g.logs) for g in groups)})
    rows = sum(f.rows for f in txn.files)
    return ServiceResult(Action.LOG_COMPACTION, txn.id, len(txn.files), 0, rows)


class LogCompaction(Service):
    """Hudi's log compaction: a slice's logs merged into one (no lease to complete)."""

    action = Action.LOG_COMPACTION

    def automatic(self, spec: TableSpec) -> bool:
        return slices_compacted_automatically(spec)

    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        return due_scope(spec, files, full=False)

    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        o = spec.options
        if not scope.automatic:
            return schedule_log(store, spec, 2, scope.partitions)
        if planned_already(store, spec, scope):
            return None
        most = o.compaction_target_io_mb * 1024 * 1024
        return schedule_log(store, spec, o.compaction_delta_commits, scope.partitions, most)

    def execute(self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> Any:
        return run_log(store, spec, instant)

    def reads_bytes(self, store: TableStore, timeline: Any, found: Any) -> int:
        return HEAVY  # small, but every few writes: off the writer's interpreter lock


#: What a log compaction counts as reading: always enough for a process of its own.
HEAVY = 1 << 62
