"""A quiet console for the ``dynbucket`` command: only dynbucket's own output on the terminal.

Ray, Spark and the JVM write to the process's file descriptors 1 and 2, and so do the
processes they start (which inherit them): start-up chatter, ``WARN`` lines, Java stack
traces of failed tasks. While :func:`quiet` is active, both descriptors point at a log file;
``sys.stdout`` (dynbucket's own output) and the stream returned for messages still reach
the terminal. Python's ``sys.stderr`` (warnings, library loggers) goes to the log.

:class:`Progress` is the one progress report of long commands (``compact``, ``ingest`` of
many files): a line redrawn in place on a terminal, sparse lines elsewhere.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def log_path(command: str) -> Path:
    """Where a command's log goes: ``$XDG_CACHE_HOME/dynbucket/logs`` (``~/.cache``)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dynbucket" / "logs"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return root / f"{command}-{stamp}-{os.getpid()}.log"


#: The log file descriptors 1 and 2 point at while a :func:`quiet` block is active.
_active_log: Path | None = None


def active_log() -> Path | None:
    """The log a :func:`quiet` block sends this process's output to (None: none is active):
    a Runtime started inside one (the ``dynbucket`` command's) logs there too."""
    return _active_log


@contextmanager
def quiet(path: Path, restore: bool = True, python_stderr: bool = False) -> Iterator[TextIO]:
    """Sends descriptors 1 and 2 to ``path`` for the block; yields the terminal's error
    stream for dynbucket's own messages. Restores everything on the way out, unless
    ``restore`` is False (a command about to exit): then ``sys.stdout`` and ``sys.stderr``
    stay on the log too, with the descriptors, because Ray's threads may still print
    what its workers wrote after the command ended (a Java worker's crash report at
    shutdown once reached the terminal), and the yielded stream stays open.
    ``python_stderr``: Python's ``sys.stderr`` stays on the terminal too (a user's
    script: its tracebacks, warnings and loggers are its own output); what holds the old
    stream object (loggers Ray and Spark set up before) writes to the log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal_out = io.TextIOWrapper(os.fdopen(os.dup(saved_out), "wb"), line_buffering=True)
    terminal_err = io.TextIOWrapper(os.fdopen(os.dup(saved_err), "wb"), line_buffering=True)
    stdout = sys.stdout
    with open(path, "ab", buffering=0) as log:
        global _active_log
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        before, _active_log = _active_log, path
        sys.stdout = terminal_out
        stderr = sys.stderr
        if python_stderr:
            sys.stderr = terminal_err
        try:
            yield terminal_err
        finally:
            for stream in (terminal_out, terminal_err, sys.stderr):
                stream.flush()
            if restore:
                _active_log = before
                sys.stdout, sys.stderr = stdout, stderr
                os.dup2(saved_out, 1)
                os.dup2(saved_err, 2)
                os.close(saved_out)
                os.close(saved_err)
                terminal_out.close()
                terminal_err.close()
            else:  # the log's descriptor (the log may be gone: an empty one is removed)
                sys.stdout = sys.stderr = os.fdopen(os.dup(1), "w", buffering=1, errors="replace")


class Progress:
    """A long command's progress, reported as ``(done, total)`` from any thread: on a
    terminal one line redrawn in place; on a pipe or a file a line at most every ``every``
    seconds (a short command prints nothing) and, if one was printed, a last one.

    Args:
        label: what is being done ("compaction").
        unit: what is counted ("file groups").
        out: where to write (default: standard error).
        every: seconds between lines on a pipe or a file.
        clock: the time source (tests give their own).
    """

    def __init__(
        self,
        label: str,
        unit: str,
        out: TextIO | None = None,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.unit, self.every, self.clock = label, unit, every, clock
        self.out = out if out is not None else sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.start = self.last = clock()
        self.shown: tuple[int, int] | None = None
        self.done, self.total = 0, 0
        self._lock = threading.Lock()

    def __call__(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total
            now = self.clock()
            if self.tty or now - self.last >= self.every:
                self._show(now)

    def _show(self, now: float) -> None:
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        line = (
            f"{self.label}: {self.done:,}/{self.total:,} {self.unit}{pct}, {now - self.start:.0f} s"
        )
        if self.tty:
            self.out.write("\r" + line + "\x1b[K")
        else:
            self.out.write(line + "\n")
        self.out.flush()
        self.last, self.shown = now, (self.done, self.total)

    def close(self) -> None:
        """Ends the report: the last figures, if a line was shown and they changed (and a
        new line on a terminal)."""
        with self._lock:
            if self.shown is None:
                return
            if self.shown != (self.done, self.total):
                self._show(self.clock())
            if self.tty:
                self.out.write("\n")
                self.out.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class SparkTasks:
    """The tasks of the Spark jobs started since it started, as ``(done, total)``: what
    :func:`spark_tasks` reports. ``tracker`` is pyspark's ``StatusTracker``; ``group`` the
    job group of the thread that runs the jobs (None: none), whose jobs Spark keeps after
    they end, so a job that starts and ends between two polls still counts."""

    def __init__(self, tracker: Any, group: str | None = None) -> None:
        self.tracker = tracker
        self.group = group
        self.jobs_before = set(tracker.getJobIdsForGroup(group))
        self.before = set(tracker.getActiveStageIds())
        self.stages: dict[int, tuple[int, int]] = {}

    def poll(self) -> tuple[int, int]:
        """1. The stages of the group's jobs since the start, and stages running now (not
        those running before the start), join those seen; 2. each seen stage's completed
        and total tasks (a finished stage keeps its last), but a stage that a succeeded job
        left with none done: skipped, its output already there, it never runs."""
        ended: set[int] = set()
        for job in set(self.tracker.getJobIdsForGroup(self.group)) - self.jobs_before:  # 1.
            info = self.tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                self.stages.setdefault(stage, (0, 0))
                if info is not None and info.status == "SUCCEEDED":
                    ended.add(stage)
        for stage in self.tracker.getActiveStageIds():
            if stage not in self.before:
                self.stages.setdefault(stage, (0, 0))
        for stage in list(self.stages):  # 2.
            info = self.tracker.getStageInfo(stage)
            if info is None:
                continue
            if stage in ended and info.numCompletedTasks == 0:
                del self.stages[stage]
            else:
                self.stages[stage] = (info.numCompletedTasks, info.numTasks)
        return sum(d for d, _ in self.stages.values()), sum(t for _, t in self.stages.values())


@contextmanager
def spark_tasks(
    spark: Any, progress: Callable[[int, int], None], every: float = 0.5
) -> Iterator[SparkTasks]:
    """Reports the Spark tasks of the block's jobs to ``progress`` (``(done, total)``; the
    total grows as stages start), polling Spark's status tracker every ``every`` seconds
    from a thread, and once more at the end."""
    context = spark.sparkContext
    tasks = SparkTasks(context.statusTracker(), context.getLocalProperty("spark.jobGroup.id"))
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(every):
            done, total = tasks.poll()
            if total:
                progress(done, total)

    poller = threading.Thread(target=report, name="spark-progress", daemon=True)
    poller.start()
    try:
        yield tasks
    finally:
        stop.set()
        poller.join()
        done, total = tasks.poll()
        if total:
            progress(done, total)
