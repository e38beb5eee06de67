"""Running what a write made due: inline services, and compaction beside the writes.

``format/table/upkeep.py`` decides which services a write made due; this runs them for one
``Table`` after each of its writes (Hudi's writers do the same: automatic cleaning and
archival inline, compaction inline or asynchronous):

* archival runs inline, a moment under the writer lease;
* a due compaction of file slices or of the index, or a clean, is scheduled inline (a
  moment under the writer lease) and executed beside the writes: on the Ray cluster as one
  task when the table has a Runtime, else in a service process of this machine, at a
  lower priority than the writes (``service_processes``). A clean or an index
  compaction completes there; a compaction's base files are written there, and the next
  write's thread finishes it (a moment under the lease: ``compaction.finish``). One of each
  runs at a time, and one an earlier process left pending is executed before a new one is
  scheduled. With ``hoodie.compact.inline`` they run inside the write instead.

A failure of a service never fails the write that made it due (the write is committed);
it is logged, and the service is due again after the next write.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from dynbucket.format.file_group.context import TableRef
from dynbucket.format.table import compaction, services
from dynbucket.format.table import upkeep as due_services
from dynbucket.format.table.results import ServiceResult
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.write.results import WriteResult

log = logging.getLogger(__name__)


def execute(table: TableRef, action: str, instant: str) -> Any:
    """Executes a scheduled service beside the writes (in whichever process runs it): a
    compaction's base files (returned: the writer's thread finishes it), or a whole clean
    or index compaction (completed here; they need no lease)."""
    if action == "compaction":
        # Beside the writes at the same priority (a Ray task), a core stays with them.
        # In a service process (lower priority) every core: the writes still come first.
        cores = os.cpu_count() or 2
        threads = cores if os.getpriority(os.PRIO_PROCESS, 0) > 0 else max(1, cores - 1)
        return compaction.execute(table.store, table.spec, instant, threads)
    if action == "clean":
        return services.execute_clean(table.store, table.spec, instant)
    return services.execute_index_compaction(table.store, table.spec, instant)


#: The process's service processes, (pid, pool): made at the first service run beside the
#: writes of a table without a cluster, shared by every table of the process, shut down at
#: exit. A thread of the writer's process would share its interpreter lock and its CPU
#: priority with the writes; these processes run at a lower priority, so a write does not
#: wait for a compaction's CPU.
_PROCESSES: tuple[int, ProcessPoolExecutor] | None = None
_PROCESSES_LOCK = threading.Lock()
#: Processes: a compaction and a clean or an index compaction at the same time.
SERVICE_PROCESSES = 2


def _lower_priority() -> None:
    os.nice(10)


def service_processes() -> ProcessPoolExecutor:
    """The process's pool of service processes (started at the first call; spawned, not
    forked: the writer's threads and locks stay where they are)."""
    global _PROCESSES
    with _PROCESSES_LOCK:
        if _PROCESSES is None or _PROCESSES[0] != os.getpid():
            pool = ProcessPoolExecutor(
                SERVICE_PROCESSES,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_lower_priority,
            )
            _PROCESSES = (os.getpid(), pool)
        return _PROCESSES[1]


def shutdown_service_processes() -> None:
    """Stops the service processes (waiting for what they run); the next service run
    starts them again."""
    global _PROCESSES
    with _PROCESSES_LOCK:
        found, _PROCESSES = _PROCESSES, None
    if found is not None and found[0] == os.getpid():
        found[1].shutdown(wait=True)


class TableUpkeep:
    """The services of one table's writes; ``close`` waits for those running beside them.

    Args:
        table: the table.
        on_ray: runs compactions as Ray tasks (the driver's Ray must be connected), else in
            the process's service processes.
    """

    def __init__(self, table: TableRef, on_ray: Callable[[], bool] = lambda: False) -> None:
        self.table = table
        self.on_ray = on_ray
        self._running: dict[str, tuple[str, Future[Any] | Any]] = {}

    def after(self, result: WriteResult) -> WriteResult:
        """Runs what ``result``'s write made due; returns it with the services named."""
        if not result.due and not self._running:
            return result
        ran: list[str] = []
        store, spec = self.table.store, self.table.spec
        try:
            finished = [self._collect(a) for a in list(self._running) if self.done(a)]
            ran += [f"{r.action} {r.instant} (finished)" for r in finished if r and r.instant]
            for r in due_services.run_inline(store, spec, result.due):
                ran.append(f"{r.action} {r.instant}")
            if due_services.beside(spec):
                slices = functools.partial(
                    compaction.schedule,
                    store,
                    spec,
                    spec.options.compaction_delta_commits,
                    max_bytes=due_services.target_io_bytes(spec),
                )
                index = functools.partial(
                    services.schedule_index_compaction,
                    store,
                    spec,
                    partitions=result.due.index_partitions,
                )
                clean = functools.partial(services.schedule_clean, store, spec)
                for action, due, plan in (
                    ("compaction", result.due.compaction, slices),
                    ("clean", result.due.clean, clean),
                    ("index-compaction", bool(result.due.index_partitions), index),
                ):
                    if due:
                        ran += self._beside(action, self._schedule(action, plan))
        except Exception:
            log.exception("a service after instant %s failed; it is due again", result.instant)
        return dataclasses.replace(result, services=tuple(ran))

    def _schedule(self, action: str, plan: Callable[[], str | None]) -> Callable[[], str | None]:
        """Scheduling of ``action``: one an earlier process left pending (its executor
        died) is run again first; else ``plan`` schedules a new one."""

        def schedule() -> str | None:
            timeline = Timeline(self.table.store, self.table.spec.options.merge_on_read)
            left = services.pending_of(timeline, action)
            return left[0].id if left else plan()

        return schedule

    def _beside(self, action: str, schedule: Callable[[], str | None]) -> list[str]:
        """Schedules a service of ``action`` and starts its execution beside the writes
        (none while one of the same action runs)."""
        if action in self._running:
            return []
        instant = schedule()
        if instant is None:
            return []
        if self.on_ray():
            import ray

            # No CPU reserved: Spark executors and slot actors may hold every CPU the cluster
            # has, and a task waiting for one would never run (a close would wait forever).
            task = ray.remote(num_cpus=0, max_retries=0)(execute)
            self._running[action] = (instant, task.remote(self.table, action, instant))
        else:
            job = service_processes().submit(execute, self.table, action, instant)
            self._running[action] = (instant, job)
        return [f"{action} {instant} (beside the writes)"]

    def done(self, action: str) -> bool:
        """Whether the service of ``action`` running beside the writes has finished."""
        _, running = self._running[action]
        if isinstance(running, Future):
            return running.done()
        import ray

        return bool(ray.wait([running], timeout=0)[0])

    def _collect(self, action: str) -> ServiceResult | None:
        """A service's result, waiting for it; a compaction is finished here, in the
        writer's thread (a moment under the lease). A failure is logged: the service stays
        pending and runs again later."""
        instant, running = self._running.pop(action)
        try:
            if isinstance(running, Future):
                out = running.result()
            else:
                import ray

                out = ray.get(running)
            if action == "compaction":
                return compaction.finish(self.table.store, self.table.spec, instant, out)
            return out
        except Exception:
            log.exception("%s %s beside the writes failed; it runs again later", action, instant)
            return None

    def wait(self) -> list[ServiceResult]:
        """Waits for the services running beside the writes; returns their results."""
        out = [self._collect(action) for action in list(self._running)]
        return [r for r in out if r is not None]

    def close(self) -> None:
        """Waits for the services running beside the writes (the service processes stay
        for other tables; they stop at exit, or with ``shutdown_service_processes``)."""
        self.wait()
