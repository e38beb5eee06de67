"""A detached instant's plan: recorded whole or not, executable or not, and left pending.

A service that runs beside the writes (``DETACHED_ACTIONS``: compactions of slices or of
the index, cleans) is scheduled under the lease (``transaction.schedule``) and executed
later, by the same process or, if that one died, by the next writer that finds it left
pending. What can be executed is read from the plan the scheduler recorded and from the
instant's outcome: a plan recorded whole, and no writer that decided it rolled back.
"""

from __future__ import annotations

from typing import Any

from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline import heartbeat, outcome
from dynbucket.format.timeline.actions import COMPACTIONS, DETACHED_ACTIONS
from dynbucket.format.timeline.timeline import Instant, Timeline

#: The plan entry by which a detached instant says its whole plan is recorded: one without
#: it was left by a scheduler that died (or stalled past its lease) before it recorded it.
SCHEDULED = "scheduled"
#: Entries that plans recorded before ``SCHEDULED`` existed hold (the services' own).
_PLAN_ENTRIES = ("groups", "earliest-retained", "partitions", "merges")


def is_scheduled(plan: dict[str, Any]) -> bool:
    """Whether a detached instant's plan (``Timeline.plan``) was recorded whole, so that it
    can be executed; one that was not is rolled back by the next writer (``begin``)."""
    return bool(plan.get(SCHEDULED)) or any(k in plan for k in _PLAN_ENTRIES)


def executable(store: TableStore, timeline: Timeline, instant: Instant) -> bool:
    """Whether a pending detached instant can be executed and completed: its plan was
    recorded whole, and no writer decided it rolled back (a scheduler paused past its lease
    between its last lease check and its plan's write wrote the plan onto an instant the
    next writer had rolled back: no executor can commit it, the next writer settles it)."""
    if not is_scheduled(timeline.plan(instant)):
        return False
    decided = outcome.read(store, instant.id)
    return decided is None or decided.state != outcome.ROLLED_BACK


def left_pending(timeline: Timeline, *actions: str) -> list[Instant]:
    """The executable (:func:`executable`), not completed instants of ``actions``
    (default: every detached action), oldest first: running now, or left by an executor
    that died."""
    wanted = actions or DETACHED_ACTIONS
    pending = [i for i in timeline.pending() if i.action in wanted]
    return [i for i in pending if executable(timeline.store, timeline, i)]


def unattended(timeline: Timeline, *actions: str) -> list[Instant]:
    """Of :func:`left_pending`, the instants no live process executes: nobody beats their
    heartbeat (``heartbeat.beating``), so their executor died (or an older process, which
    beat none, ran them). Beside another writer, its service running now is not
    executed a second time (two writers of ``bench writers`` started 6 compaction
    executions and completed 2 compactions when each executed the other's again)."""
    store = timeline.store
    return [i for i in left_pending(timeline, *actions) if not heartbeat.is_alive(store, i.id)]


def left_pending_one(timeline: Timeline, action: str, instant: str) -> Instant | None:
    """The executable, not completed instant ``instant`` of ``action`` (None: completed,
    rolled back, or never scheduled whole): :func:`left_pending`, by id."""
    return next((i for i in left_pending(timeline, action) if i.id == instant), None)


def compaction_groups(timeline: Timeline, instant: Instant) -> list[tuple[str, str, str]]:
    """(partition, file id, base instant) of each file group a compaction (or a log
    compaction) plans."""
    return [(p, f, b) for p, f, b, *_ in timeline.plan(instant).get("groups", [])]


def compacting(timeline: Timeline, pending: list[Instant]) -> dict[str, str]:
    """File id -> the instant of the compaction or log compaction of ``pending`` that
    plans its group."""
    return {
        file_id: p.id
        for p in pending
        if p.action in COMPACTIONS
        for _, file_id, _ in compaction_groups(timeline, p)
    }
