"""Where work runs beside its caller: threads of this process, the service processes of
this machine, or (``write/ray_tasks.py``) Ray tasks over a cluster.

One contract for every caller that hands work away: the table services running beside the
writes, a compaction's groups spread over tasks, an adoption's index build. ``submit``
starts one call and returns a handle that says whether it is done and gives its result
(raising what it raised); ``map`` runs calls and returns their results in order,
telling ``done`` the index of each call as it finishes (any order).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import os
import sys
import threading
import time
import types
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol


class Running(Protocol):
    """A call running beside the caller."""

    def done(self) -> bool: ...

    def result(self) -> Any: ...


class Beside(ABC):
    """Runs calls beside the caller."""

    #: Whether calls run at a lower CPU priority than the caller (its writes come first).
    lower_priority = False

    @abstractmethod
    def submit(self, fn: Callable[..., Any], *args: Any) -> Running:
        """Starts ``fn(*args)``."""

    @abstractmethod
    def cpus(self) -> int:
        """CPUs the calls may spread over."""

    def each_done(self, running: Sequence[Running]) -> Iterator[int]:
        """The indexes of ``running`` as each finishes (Futures: ``as_completed``)."""
        futures: list[Future[Any]] = list(running)  # type: ignore[arg-type]
        index = {id(f): i for i, f in enumerate(futures)}
        for f in as_completed(futures):
            yield index[id(f)]

    def map(
        self,
        fn: Callable[..., Any],
        calls: Sequence[tuple[Any, ...]],
        done: Callable[[int], None] | None = None,
    ) -> list[Any]:
        """``fn(*args)`` of each of ``calls``, run beside, results in order; the first
        failure raises once every call finished."""
        running = [self.submit(fn, *args) for args in calls]
        for i in self.each_done(running):
            if done is not None:
                done(i)
        return [r.result() for r in running]


class Threads(Beside):
    """Threads of this process (``workers`` of them; made at the first call). They share
    the caller's interpreter lock and CPU priority: for small work."""

    def __init__(self, workers: int, name: str = "beside") -> None:
        self.workers, self.name = max(1, workers), name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, f"dynbucket-{self.name}")
            return self._pool.submit(fn, *args)

    def cpus(self) -> int:
        return self.workers

    def close(self) -> None:
        """Waits for the calls running and stops the threads (a later submit starts them
        again)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def in_threads(
    fn: Callable[..., Any],
    calls: Sequence[tuple[Any, ...]],
    workers: int,
    done: Callable[[int], None] | None = None,
) -> list[Any]:
    """``Threads(workers).map`` in threads of its own, stopped when it returns (for a
    caller that may itself run in a pool: pools must not wait on themselves)."""
    threads = Threads(min(workers, max(1, len(calls))), "calls")
    try:
        return threads.map(fn, calls, done)
    finally:
        threads.close()


class ServiceProcesses(Beside):
    """The service processes of this machine: spawned once per process (a pool shared by
    every table), at a lower CPU priority than the writes, each ending when the process
    that started it ends, however it ends. A thread of the writer's process would share its
    interpreter lock and priority with the writes: threads serve only a process that may
    not start processes (``submit_service``)."""

    lower_priority = True

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return submit_service(fn, *args)

    def cpus(self) -> int:
        return os.cpu_count() or 2


#: The process's service processes, (pid, pool): made at the first submit, shut down at
#: exit (or by ``shutdown_service_processes``).
_PROCESSES: tuple[int, ProcessPoolExecutor] | None = None
_PROCESSES_LOCK = threading.Lock()
#: Processes at least: a compaction, a log compaction and a clean or an index compaction
#: at the same time (one per CPU, for the shares of a large compaction).
SERVICE_PROCESSES = 3
#: Seconds between a service process's looks at whether its parent is still there.
PARENT_POLL_SECONDS = 0.5


def _service_process_start(parent: int) -> None:
    """A service process's set-up: a lower priority than the writes, and an end when the
    process that started it ends, however it ends (SIGKILL, an OOM kill: no shutdown at
    exit runs then, and a spawned process would live on, re-parented, for good)."""
    os.nice(10)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def _exit_with(parent: int) -> None:
    """Ends this process once ``parent`` is no longer its parent (it died: the process was
    re-parented). What it was running is work beside the writes: a service cut short is
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
            # A multiprocessing child joins its child processes at its end before the
            # interpreter's exit stops the pool: idle workers wait for work, and it
            # would never end. Stop the pool first (made after the pool's own queue
            # finalizer, and of higher priority: it runs while that queue is open).
            multiprocessing.util.Finalize(pool, pool.shutdown, exitpriority=20)
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


#: The service threads of a process that may not start processes, (pid, pool).
_THREADS: tuple[int, ThreadPoolExecutor] | None = None


def may_start_processes() -> bool:
    """Whether this process may start child processes: a daemonic one (a worker of a
    ``multiprocessing.Pool``, of many task queues and servers) may not."""
    return not multiprocessing.current_process().daemon


def _service_threads() -> ThreadPoolExecutor:
    """The service threads of this process (started at the first call)."""
    global _THREADS
    with _PROCESSES_LOCK:
        if _THREADS is None or _THREADS[0] != os.getpid():
            pool = ThreadPoolExecutor(
                max(SERVICE_PROCESSES, os.cpu_count() or 1), thread_name_prefix="services"
            )
            _THREADS = (os.getpid(), pool)
        return _THREADS[1]


def submit_service(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Runs ``fn(*args)`` in a service process (a pool that broke, a process of it
    killed, is replaced once); in a thread of this process when it may not start
    processes (``may_start_processes``: every service of a writer in a
    ``multiprocessing.Pool`` worker failed to start, so none ever ran and its table's
    logs and timeline grew with every write)."""
    global _PROCESSES
    if not may_start_processes():
        return _service_threads().submit(fn, *args)
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
    """Stops the service processes (waiting for what they run); the next submit starts
    them again."""
    global _PROCESSES
    with _PROCESSES_LOCK:
        found, _PROCESSES = _PROCESSES, None
    if found is not None and found[0] == os.getpid():
        found[1].shutdown(wait=True)
