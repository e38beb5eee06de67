"""Running what a write made due: inline services, and compaction beside the writes.

``format/table/upkeep.py`` decides which services a write made due; this runs them for one
``Table`` after each of its writes (Hudi's writers do the same: automatic cleaning and
archival inline, compaction inline or asynchronous):

* archival runs inline, a moment under the writer lease;
* a due compaction of file slices or of the index, or a clean, is scheduled inline (a
  moment under the writer lease) and executed beside the writes: on the Ray cluster as one
  task when the table has a Runtime; else, when it reads ``HEAVY_BYTES`` or more, in a
  service process of this machine at a lower priority than the writes
  (``service_processes``), and in a thread of this process when small. A clean or an index
  compaction completes there; a compaction's base files are written there, and the next
  write's thread finishes it (a moment under the lease: ``compaction.finish``). One of each
  runs at a time, and one an earlier process left pending is executed before a new one is
  scheduled. With ``hoodie.compact.inline`` they run inside the write instead.

A failure of a service never fails the write that made it due (the write is committed);
it is logged, and the service is due again after the next write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import multiprocessing
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from dynbucket.format.file_group.context import TableRef
from dynbucket.format.index.files import index_files
from dynbucket.format.table import compaction, services
from dynbucket.format.table import upkeep as due_services
from dynbucket.format.table.compaction import Group
from dynbucket.format.table.results import ServiceResult
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import WrittenFile, compaction_groups
from dynbucket.write.results import WriteResult

log = logging.getLogger(__name__)


def execute(table: TableRef, action: str, instant: str) -> Any:
    """Executes a scheduled service beside the writes (in whichever process runs it): a
    compaction's base files (returned: the writer's thread finishes it), or a whole log
    compaction, clean or index compaction (completed here; they need no lease)."""
    if action == "compaction":
        # Beside the writes at the same priority (a Ray task), a core stays with them.
        # In a service process (lower priority) every core: the writes still come first.
        cores = os.cpu_count() or 2
        threads = cores if os.getpriority(os.PRIO_PROCESS, 0) > 0 else max(1, cores - 1)
        return compaction.execute(table.store, table.spec, instant, threads)
    if action == "logcompaction":
        return compaction.run_log(table.store, table.spec, instant)
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
#: Processes at least: a compaction, a log compaction and a clean or an index compaction
#: at the same time (one per CPU, for the shares of a large compaction).
SERVICE_PROCESSES = 3


def _service_process_start(parent: int) -> None:
    """A service process's set-up: a lower priority than the writes, and an end when the
    process that started it ends, however it ends (SIGKILL, an OOM kill: no shutdown at
    exit runs then, and a spawned process would live on, re-parented, for good)."""
    os.nice(10)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


#: Seconds between a service process's looks at whether its parent is still there.
PARENT_POLL_SECONDS = 0.5


def _exit_with(parent: int) -> None:
    """Ends this process once ``parent`` is no longer its parent (it died: the process was
    re-parented). What it was running is a service beside the writes: one cut short is
    finished by a later run (``DETACHED_ACTIONS``)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def service_processes() -> ProcessPoolExecutor:
    """The process's pool of service processes (started at the first call; spawned, not
    forked: the writer's threads and locks stay where they are)."""
    global _PROCESSES
    with _PROCESSES_LOCK:
        if _PROCESSES is None or _PROCESSES[0] != os.getpid():
            pool = ProcessPoolExecutor(
                max(SERVICE_PROCESSES, os.cpu_count() or 1),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_service_process_start,
                initargs=(os.getpid(),),
            )
            _PROCESSES = (os.getpid(), pool)
        return _PROCESSES[1]


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """While service processes start: a spawned process imports the parent's main module
    to set itself up, and a user's driver script without an ``if __name__ ==
    "__main__":`` guard would run again in it (write again). The services need nothing of
    it: they are functions of this package."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def submit_service(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Runs ``fn(*args)`` in a service process (a pool that broke, a process of it
    killed, is replaced once)."""
    global _PROCESSES
    try:
        return _submit(fn, *args)
    except BrokenProcessPool:
        with _PROCESSES_LOCK:
            _PROCESSES = None
        return _submit(fn, *args)


#: Service processes start inside a submit: one at a time, with ``__main__`` hidden.
_SUBMIT_LOCK = threading.Lock()


def _submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    with _SUBMIT_LOCK, _main_hidden():
        return service_processes().submit(fn, *args)


def shutdown_service_processes() -> None:
    """Stops the service processes (waiting for what they run); the next service run
    starts them again."""
    global _PROCESSES
    with _PROCESSES_LOCK:
        found, _PROCESSES = _PROCESSES, None
    if found is not None and found[0] == os.getpid():
        found[1].shutdown(wait=True)


def execute_share(table: TableRef, instant: str, groups: list[Group]) -> list[WrittenFile]:
    """A share of a compaction's groups, executed in a task (one thread: the tasks are the
    parallelism)."""
    return compaction.execute_groups(table.store, table.spec, instant, groups, threads=1)


def compact_spread(
    table: TableRef,
    on_ray: bool,
    partitions: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ServiceResult:
    """``Table.compact``: every slice with logs compacted now, its groups spread over tasks
    (Ray tasks with a cluster, else the service processes) when they are many and large;
    a small compaction runs here, in threads (starting processes would cost more). A
    compaction an earlier process left pending is executed first, the same way.
    ``progress`` is told (groups done, groups planned) as groups are written."""
    store, spec = table.store, table.spec
    for left in compaction.pending(Timeline(store, spec.options.merge_on_read)):
        _execute_spread(table, left.id, on_ray, progress)
    instant = compaction.schedule(store, spec, 1, partitions)
    if instant is None:
        return ServiceResult("compaction", None)
    return _execute_spread(table, instant, on_ray, progress)


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


#: Bytes a service beside the writes reads from which it runs in a service process.
HEAVY_BYTES = 16 * 1024 * 1024
#: Bytes of slices below which a compaction runs in the caller's threads.
SPREAD_BYTES = 128 * 1024 * 1024


def _execute_spread(
    table: TableRef,
    instant: str,
    on_ray: bool,
    progress: Callable[[int, int], None] | None = None,
) -> ServiceResult:
    """1. The plan's groups and their slices' sizes; 2. shares balanced by size (largest
    first onto the lightest share), one per CPU; 3. the shares as tasks, or in threads
    here when small; 4. the finish, here (a moment under the lease)."""
    store, spec = table.store, table.spec
    timeline = Timeline(store, spec.options.merge_on_read)  # 1.
    found = next(i for i in compaction.pending(timeline) if i.id == instant)
    groups = compaction_groups(timeline, found)
    sizes = compaction.planned_sizes(store, groups)
    count = _Count(len(groups), progress)
    if (not on_ray and sum(sizes) < SPREAD_BYTES) or len(groups) < 2:  # 3. small
        written = compaction.execute_groups(store, spec, instant, groups, 4, count)
        return compaction.finish(store, spec, instant, written)
    if on_ray:
        import ray

    cpus = int(ray.cluster_resources().get("CPU", 1)) if on_ray else os.cpu_count() or 2
    shares: list[list[Group]] = [[] for _ in range(max(1, min(cpus, len(groups))))]  # 2.
    loads = [0] * len(shares)
    for size, group in sorted(zip(sizes, groups, strict=True), reverse=True):
        lightest = loads.index(min(loads))
        shares[lightest].append(group)
        loads[lightest] += size
    if on_ray:
        # No CPU reserved, as for the services beside the writes (Spark may hold them all).
        task = ray.remote(num_cpus=0, max_retries=0)(execute_share)
        refs = {task.remote(table, instant, share): len(share) for share in shares}
        left = list(refs)
        while left:
            ready, left = ray.wait(left, num_returns=1)
            count(refs[ready[0]])
        parts = ray.get(list(refs))
    else:
        jobs = {
            submit_service(execute_share, table, instant, share): len(share) for share in shares
        }
        for job in as_completed(jobs):
            job.result()
            count(jobs[job])
        parts = [job.result() for job in jobs]
    written = [f for part in parts for f in part]
    return compaction.finish(store, spec, instant, written)  # 4.


class TableUpkeep:
    """The services of one table's writes; ``close`` waits for those running beside them.

    Args:
        table: the table.
        on_ray: runs services as Ray tasks (the driver's Ray must be connected), else in
            the process's service processes (``HEAVY_BYTES`` or more) or a thread.
    """

    def __init__(self, table: TableRef, on_ray: Callable[[], bool] = lambda: False) -> None:
        self.table = table
        self.on_ray = on_ray
        self._running: dict[str, tuple[str, Future[Any] | Any]] = {}
        self._index_wait: dict[str, int] = {}  # partition -> writes before it is looked at
        self._index_files: dict[str, int] = {}  # partition -> index files its planning saw
        self._threads: ThreadPoolExecutor | None = None

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
                n, most = spec.options.compaction_delta_commits, due_services.target_io_bytes(spec)
                slices = functools.partial(
                    compaction.schedule, store, spec, n, max_bytes=most, by_size=True
                )
                logs = functools.partial(compaction.schedule_log, store, spec, n, max_bytes=most)
                due_index = self._index_candidates(result.due.index_partitions)
                index = functools.partial(
                    services.schedule_index_compaction,
                    store,
                    spec,
                    partitions=due_index,
                    by_size=True,
                    seen=self._index_files,
                )
                clean = functools.partial(services.schedule_clean, store, spec)
                left = result.due.left
                for action, due, plan in (
                    ("compaction", result.due.compaction, slices),
                    ("logcompaction", result.due.log_compaction, logs),
                    ("clean", result.due.clean, clean),
                    ("index-compaction", bool(due_index), index),
                ):
                    if due or action in left:  # one left pending runs first (_schedule)
                        ran += self._beside(action, self._schedule(action, plan, due))
                self._index_seen()
        except Exception:
            log.exception("a service after instant %s failed; it is due again", result.instant)
        return dataclasses.replace(result, services=tuple(ran))

    def _index_candidates(self, written: Sequence[str]) -> list[str]:
        """The partitions written to whose index may have reached
        ``index.compaction.min-files``: a partition found with ``c`` files is not looked at
        again before ``min-files - c`` more writes (a write in this process adds one index
        file to a partition; with a cluster, its tasks may add several: always looked at)."""
        if self.on_ray():
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

    def _schedule(
        self, action: str, plan: Callable[[], str | None], due: bool = True
    ) -> Callable[[], str | None]:
        """Scheduling of ``action``: one an earlier process left pending (its executor
        died) is run again first; else, when ``due``, ``plan`` schedules a new one."""

        def schedule() -> str | None:
            timeline = Timeline(self.table.store, self.table.spec.options.merge_on_read)
            left = services.pending_of(timeline, action)
            if left:
                return left[0].id
            return plan() if due else None

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
        elif self._heavy(action, instant):
            job = submit_service(execute, self.table, action, instant)
            self._running[action] = (instant, job)
        else:
            if self._threads is None:  # a thread per action: a clean need not wait
                self._threads = ThreadPoolExecutor(4, thread_name_prefix="dynbucket-services")
            self._running[action] = (instant, self._threads.submit(self._light, action, instant))
        return [f"{action} {instant} (beside the writes)"]

    def _light(self, action: str, instant: str) -> Any:
        """A small service in a thread of this process, compaction in one thread (its
        pieces are small; the writes keep the other cores)."""
        if action == "compaction":
            return compaction.execute(self.table.store, self.table.spec, instant, threads=1)
        return execute(self.table, action, instant)

    def _heavy(self, action: str, instant: str) -> bool:
        """Whether a service reads enough (``HEAVY_BYTES``) to run in a service process
        rather than a thread here (a process costs a start, about a second, once; a
        thread shares this process's interpreter lock with the writes)."""
        store = self.table.store
        timeline = Timeline(store, self.table.spec.options.merge_on_read)
        found = next((i for i in timeline.pending() if i.id == instant), None)
        if found is None:
            return False
        if action == "compaction":
            return sum(compaction.planned_sizes(store, compaction_groups(timeline, found))) >= (
                HEAVY_BYTES
            )
        if action == "logcompaction":
            return True  # small, but every few writes: off this interpreter's lock
        if action == "index-compaction":
            plan = timeline.plan(found)
            partitions = plan.get("partitions", [])
            merges = {n for names_ in plan.get("merges", {}).values() for n in names_}
            read = sum(f.size for p in partitions for f in index_files(store, p))
            read += sum(f.size for p in plan.get("merges", {}) for f in index_files(store, p)
                        if f.name in merges)  # fmt: skip
            return read >= HEAVY_BYTES
        return False

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
        """Waits for the services running beside the writes and stops its threads (the
        service processes stay for other tables; they stop at exit, or with
        ``shutdown_service_processes``)."""
        self.wait()
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
