"""The runner of a table's services: what its writes made due, and ``Table.compact``,
``Table.clean`` and ``Table.compact_index``, all through one object, so that one service
never runs twice at once in a process.

``format/services/due.py`` decides which services a write made due; this runs them for one
``Table`` after each of its writes (Hudi's writers do the same: automatic cleaning and
archival inline, compaction inline or asynchronous):

* archival runs inline, a moment under the writer lease;
* a due compaction of file slices or of the index, or a clean, is scheduled inline (a
  moment under the writer lease) and executed beside the writes: on the cluster the table
  has (the executor its owner injects: Ray tasks, ``write/ray_tasks.py``, when the table
  has a Runtime) as one task; else, when it reads ``HEAVY_BYTES`` or more, in a service
  process of this machine at a lower priority than the writes (``base/beside.py``), and in
  a thread of this process when small. A clean or an index
  compaction completes there; a compaction's base files are written there, and the next
  write's thread finishes it (a moment under the lease: ``compaction.finish``). One of each
  runs at a time, and one an earlier process left pending is executed before a new one is
  scheduled. With ``hoodie.compact.inline`` they run inside the write instead.

A failure of a service never fails the write that made it due (the write is committed);
it is logged, and the service is due again after the next write. A service the user
asks for (``Table.compact`` ...) waits for the one of its action running beside the writes
first: it would otherwise execute the same pending plan a second time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from dynbucket.base.beside import Beside, Running, ServiceProcesses, Threads
from dynbucket.base.errors import ConcurrentWriteError, InstantNotFoundError
from dynbucket.format.services import compaction
from dynbucket.format.services import due as due_services
from dynbucket.format.services.compaction import Group
from dynbucket.format.services.registry import SERVICES
from dynbucket.format.services.service import Scope, ServiceResult, pending_instant, run_now
from dynbucket.format.table import schemas
from dynbucket.format.table.context import TableRef
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.heartbeat import (
    Heartbeat,
    beating,
    end_executor_beat,
    executor_beat,
)
from dynbucket.format.timeline.plans import compaction_groups, left_pending, unattended
from dynbucket.format.timeline.timeline import Timeline, compaction_writing
from dynbucket.format.timeline.transaction import WrittenFile

log = logging.getLogger(__name__)


def execute(table: TableRef, action: str, instant: str, threads: int | None = None) -> Any:
    """Executes a scheduled service beside the writes (in whichever process runs it): a
    compaction's base files (returned: the writer's thread finishes it), or a whole log
    compaction, clean or index compaction (completed here; they need no lease).
    ``threads``: a compaction's (default: beside the writes at the same priority, a Ray
    task, a core stays with them; in a service process, at a lower priority, every core:
    the writes still come first)."""
    if threads is None:
        cores = os.cpu_count() or 2
        threads = cores if os.getpriority(os.PRIO_PROCESS, 0) > 0 else max(1, cores - 1)
    return SERVICES[action].execute(table.store, table.spec, instant, threads)


def execute_share(
    table: TableRef, instant: str, groups: list[Group], writing: tuple[str, ...] = ()
) -> list[WrittenFile]:
    """A share of a compaction's groups, executed in a task (one thread: the tasks are the
    parallelism); ``writing``: the plan's (``compaction_writing``)."""
    return compaction.execute_groups(
        table.store, table.spec, instant, groups, threads=1, writing=writing
    )


class _Count:
    """Groups done of a compaction, told to a ``progress(done, total)`` (any thread)."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None) -> None:
        self.total, self.progress, self.done = total, progress, 0
        self._lock = threading.Lock()
        self(0)

    def __call__(self, groups: int) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.done += groups
            self.progress(self.done, self.total)


#: Finishes an executed service is given after its own (after each of the writer's next
#: writes, then at ``wait``) before it is left to another writer to execute again.
FINISH_TRIES = 4
#: Seconds ``wait`` (``Table.close``) keeps trying a failed finish.
FINISH_WAIT_SECONDS = 20.0
#: Bytes a service beside the writes reads from which it runs in a service process.
HEAVY_BYTES = 16 * 1024 * 1024
#: Bytes of slices below which a compaction runs in the caller's threads.
SPREAD_BYTES = 128 * 1024 * 1024


def _execute_spread(
    table: TableRef,
    instant: str,
    tasks: Beside,
    on_cluster: bool,
    progress: Callable[[int, int], None] | None = None,
) -> ServiceResult:
    """1. The plan's groups and their slices' sizes; 2. shares balanced by size (largest
    first onto the lightest share), one per CPU; 3. the shares as ``tasks``, or in threads
    here when small (on this machine; ``on_cluster``: only when fewer than two); 4. the
    finish, here (a moment under the lease)."""
    store, spec = table.store, table.spec
    timeline = Timeline(store, spec.options.merge_on_read)  # 1.
    found = next(i for i in left_pending(timeline, Action.COMPACTION) if i.id == instant)
    groups = compaction_groups(timeline, found)
    writing = compaction_writing(timeline, found)
    sizes = compaction.planned_sizes(store, groups)
    count = _Count(len(groups), progress)
    if (not on_cluster and sum(sizes) < SPREAD_BYTES) or len(groups) < 2:  # 3. small
        written = compaction.execute_groups(store, spec, instant, groups, 4, count, writing)
        return compaction.finish(store, spec, instant, written)
    shares: list[list[Group]] = [[] for _ in range(max(1, min(tasks.cpus(), len(groups))))]  # 2.
    loads = [0] * len(shares)
    for size, group in sorted(zip(sizes, groups, strict=True), reverse=True):
        lightest = loads.index(min(loads))
        shares[lightest].append(group)
        loads[lightest] += size
    calls = [(table, instant, share, writing) for share in shares]
    done = tasks.map(execute_share, calls, lambda i: count(len(shares[i])))  # 3.
    written = [f for share in done for f in share]
    return compaction.finish(store, spec, instant, written)  # 4.


class ServiceRunner:
    """The services of one table: after its writes, and when its user asks; ``close``
    waits for those running beside the writes.

    Args:
        table: the table.
        cluster: the executor of the cluster the table's services run on, asked at each
            service (a table may find its cluster after it opened), None while it has
            none: then they run in the machine's service processes (``HEAVY_BYTES`` or
            more) or a thread. The layer that knows the cluster injects it (``table.py``:
            Ray tasks), so the runner imports no engine.
    """

    def __init__(
        self, table: TableRef, cluster: Callable[[], Beside | None] = lambda: None
    ) -> None:
        self.table = table
        """The table as defined: its options (its schema may have evolved: ``_now``)."""
        self.cluster = cluster
        # action -> its running instant, its execution and the instant's heartbeat
        self._running: dict[str, tuple[str, Running, Heartbeat | None]] = {}
        # action -> an executed service whose finish failed: instant, what its execution
        # returned, its heartbeat (still beating: it is this runner's to finish), tries
        self._unfinished: dict[str, tuple[str, Any, Heartbeat | None, int]] = {}
        self._index_wait: dict[str, int] = {}  # partition -> writes before it is looked at
        self._index_files: dict[str, int] = {}  # partition -> index files its planning saw
        self._threads = Threads(4, "services")  # a thread per action: a clean need not wait

    def _now(self) -> TableRef:
        """The table with the schema it has now: a service rewriting rows must write every
        field the files hold (a schema only grows, so the newest is the one to write)."""
        spec = schemas.current(self.table.store, self.table.spec)
        return self.table if spec is self.table.spec else TableRef.of(self.table.store, spec)

    # --- what the user asks for ------------------------------------------------------------

    def run(self, action: str, scope: Scope) -> ServiceResult:
        """Runs a service now, in this thread (one of its action running beside the writes
        finished first: a second execution of its plan would repeat its work)."""
        self._finish_running(action)
        table = self._now()
        return run_now(SERVICES[action], table.store, table.spec, scope)

    def compact(
        self,
        partitions: Sequence[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> ServiceResult:
        """``Table.compact``: every slice with logs compacted now, its groups spread over
        tasks (Ray tasks with a cluster, else the service processes) when they are many and
        large; a small compaction runs here, in threads (starting processes would cost
        more). The compaction running beside the writes is finished first, then one an
        earlier process left pending, the same way. ``progress`` is told (groups done,
        groups planned) as groups are written."""
        self._finish_running(Action.COMPACTION)
        table, cluster = self._now(), self.cluster()
        tasks = cluster or ServiceProcesses()  # the cluster, else the machine's processes
        store, spec = table.store, table.spec
        expiry = spec.options.heartbeat_expiry_seconds
        for left in unattended(Timeline(store, spec.options.merge_on_read), Action.COMPACTION):
            with beating(store, left.id, expiry):
                _execute_spread(table, left.id, tasks, cluster is not None, progress)
        instant = compaction.schedule(store, spec, 1, partitions)
        if instant is None:
            return ServiceResult(Action.COMPACTION, None)
        with beating(store, instant, expiry):
            return _execute_spread(table, instant, tasks, cluster is not None, progress)

    def _finish_running(self, action: str) -> None:
        if action in self._running:
            self._collect(action)
        if action in self._unfinished:
            self._finish_again(action, last=True)

    # --- after the writes --------------------------------------------------------------------

    def after(self, instant: str | None, written: Sequence[WrittenFile]) -> tuple[str, ...]:
        """Runs what the write of ``instant`` (which wrote ``written``) made due; returns
        the services it ran or started, named (``WriteResult.services``)."""
        store, spec = self.table.store, self.table.spec
        due = due_services.due(spec, written, Timeline(store, spec.options.merge_on_read))
        if not due and not self._running and not self._unfinished:
            return ()
        ran: list[str] = []
        try:
            finished = [self._finish_again(a) for a in list(self._unfinished)]
            finished += [self._collect(a) for a in list(self._running) if self.done(a)]
            ran += [f"{r.action} {r.instant} (finished)" for r in finished if r and r.instant]
            table = self._now() if due else self.table
            for r in due_services.run_inline(table.store, table.spec, due):
                ran.append(f"{r.action} {r.instant}")
            if due_services.beside(spec):
                scopes = due.scopes()
                if Action.INDEX_COMPACTION in scopes:
                    due_index = self._index_candidates(due.index_partitions)
                    scopes[Action.INDEX_COMPACTION] = Scope(
                        tuple(due_index), True, seen=self._index_files
                    )
                for action in SERVICES:
                    scope = scopes.get(action)
                    if scope is not None and scope.partitions == ():
                        scope = None  # no partition's index worth a look yet
                    if scope is not None or action in due.left:
                        ran += self._beside(table, action, scope)  # one left pending first
                self._index_seen()
        except Exception:
            log.exception("a service after instant %s failed; it is due again", instant)
        return tuple(ran)

    def _index_candidates(self, written: Sequence[str]) -> list[str]:
        """The partitions written to whose index may have reached
        ``index.compaction.min-files``: a partition found with ``c`` files is not looked at
        again before ``min-files - c`` more writes (a write in this process adds one index
        file to a partition; with a cluster, its tasks may add several: always looked at)."""
        if self.cluster() is not None:
            return list(written)
        out = []
        for p in written:
            self._index_wait[p] = self._index_wait.get(p, 0) - 1
            if self._index_wait[p] <= 0:
                out.append(p)
        return out

    def _index_seen(self) -> None:
        """Notes what the last index compaction's planning counted (``_index_candidates``)."""
        threshold = self.table.spec.options.index_compaction_min_files
        for p, files in self._index_files.items():
            self._index_wait[p] = threshold - files
        self._index_files.clear()

    def _beside(self, table: TableRef, action: str, scope: Scope | None) -> list[str]:
        """Schedules a service of ``action`` and starts its execution beside the writes
        (none while one of the same action runs): one an earlier process left pending (its
        executor died) is run again first; else, when ``scope`` (it is due), a new one."""
        if action in self._running or action in self._unfinished:
            return []
        store, spec = table.store, table.spec
        service = SERVICES[action]
        timeline = Timeline(store, spec.options.merge_on_read)
        left = service.left(timeline)
        instant = left[0].id if left else None
        if instant is None and scope is not None:
            instant = service.plan(store, spec, scope)
        if instant is None:
            return []
        # Until collected: other writers leave it to this one (plans.unattended).
        beat = executor_beat(store, instant, spec.options.heartbeat_expiry_seconds)
        try:
            cluster = self.cluster()
            if cluster is not None:
                running = cluster.submit(execute, table, action, instant)
            elif self._heavy(action, instant):
                running = ServiceProcesses().submit(execute, table, action, instant)
            else:  # small: compaction in one thread (its pieces are small; writes keep the rest)
                running = self._threads.submit(execute, table, action, instant, 1)
        except BaseException:
            end_executor_beat(beat)
            raise
        self._running[action] = (instant, running, beat)
        return [f"{action} {instant} (beside the writes)"]

    def _heavy(self, action: str, instant: str) -> bool:
        """Whether a service reads enough (``HEAVY_BYTES``) to run in a service process
        rather than a thread here (a process costs a start, about a second, once; a
        thread shares this process's interpreter lock with the writes)."""
        store, spec = self.table.store, self.table.spec
        found = pending_instant(store, spec, instant, action)
        if found is None:
            return False
        timeline = Timeline(store, spec.options.merge_on_read)
        return SERVICES[action].reads_bytes(store, timeline, found) >= HEAVY_BYTES

    def done(self, action: str) -> bool:
        """Whether the service of ``action`` running beside the writes has finished."""
        return self._running[action][1].done()

    def _collect(self, action: str) -> ServiceResult | None:
        """A service's result, waiting for it; a compaction is finished here, in the
        writer's thread (a moment under the lease: ``_finish``). A failed execution is
        logged: the service stays pending, and the next writer runs it again."""
        instant, running, beat = self._running.pop(action)
        try:
            out = running.result()
        except Exception:
            log.exception("%s %s beside the writes failed; it runs again later", action, instant)
            end_executor_beat(beat)
            return None
        return self._finish(action, instant, out, beat, 1)

    def _finish(
        self, action: str, instant: str, out: Any, beat: Heartbeat | None, tries: int
    ) -> ServiceResult | None:
        """Completes an executed service. A finish refused (its lease held by a writer that
        does not wait: ``SINGLE_WRITER``; a store's error) keeps what the execution did and
        its heartbeat, so no other writer executes it again meanwhile: it is finished after
        this runner's next write or at ``wait`` (``_finish_again``). The heartbeat ends
        with the last try: another writer then executes it (``plans.unattended``)."""
        try:
            table = self._now()
            result = SERVICES[action].finish(table.store, table.spec, instant, out)
        except InstantNotFoundError as e:  # finished by an earlier run whose answer was lost
            log.info("%s %s beside the writes: %s", action, instant, e)
            result = None
        except (ConcurrentWriteError, OSError) as e:  # the lease held; the store: passes
            if tries < FINISH_TRIES:
                self._unfinished[action] = (instant, out, beat, tries)
                log.warning("%s %s: its finish failed (%s); tried again", action, instant, e)
                return None
            log.exception("%s %s: its finish failed; it runs again later", action, instant)
            result = None
        except Exception:
            log.exception("%s %s: its finish failed; it runs again later", action, instant)
            result = None
        end_executor_beat(beat)
        return result

    def _finish_again(
        self, action: str, last: bool = False, count: bool = True
    ) -> ServiceResult | None:
        """Tries again the finish of an executed service whose finish failed (``last``: this
        try is its last; ``count``: it counts towards ``FINISH_TRIES``)."""
        instant, out, beat, tries = self._unfinished.pop(action)
        tries = FINISH_TRIES if last else tries + count
        return self._finish(action, instant, out, beat, tries)

    def wait(self) -> list[ServiceResult]:
        """Waits for the services running beside the writes; returns their results. An
        executed service whose finish failed is tried again, pausing between tries, for
        up to ``FINISH_WAIT_SECONDS`` (the writer holding the lease ends its write), then
        left to the next writer."""
        out = [self._collect(action) for action in list(self._running)]
        deadline, pause = time.monotonic() + FINISH_WAIT_SECONDS, 0.1
        while self._unfinished:
            last = time.monotonic() + pause >= deadline
            if not last:
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
            out += [self._finish_again(a, last, count=False) for a in list(self._unfinished)]
        return [r for r in out if r is not None]

    def close(self) -> None:
        """Waits for the services running beside the writes and stops its threads (the
        service processes stay for other tables; they stop at exit, or with
        ``base.beside.shutdown_service_processes``)."""
        self.wait()
        self._threads.close()
