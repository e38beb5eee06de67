"""The quiet console: only dynbucket's own output on the terminal, to the process's end."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from dynbucket.console import Progress, SparkTasks

SCRIPT = r"""
import os, sys
from pathlib import Path
from dynbucket.console import quiet

log = Path(sys.argv[1])
with quiet(log, restore=False) as terminal:
    print("ours")  # dynbucket's own output: the terminal
    print("ours too", file=terminal)
    os.write(1, b"a child's chatter\n")  # what Ray's processes write: the log
# What Ray's threads print after the command ended (a worker's crash report at shutdown).
print("late out")
print("late err", file=sys.stderr)
"""


def test_output_after_a_command_ends_stays_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "cmd.log"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("ours\n", "ours too\n")
    assert log.read_text().splitlines() == ["a child's chatter", "late out", "late err"]


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_redraws_one_line_on_a_terminal() -> None:
    out, now = _Stream(tty=True), [0.0]
    with Progress("compaction", "file groups", out, clock=lambda: now[0]) as progress:
        progress(0, 4)
        now[0] = 3.0
        progress(3, 4)
    assert out.getvalue() == (
        "\rcompaction: 0/4 file groups (0%), 0 s\x1b[K"
        "\rcompaction: 3/4 file groups (75%), 3 s\x1b[K\n"
    )


def test_progress_elsewhere_is_a_line_every_so_often_and_none_for_a_short_command() -> None:
    out, now = _Stream(tty=False), [0.0]
    with Progress("reading", "files", out, every=10, clock=lambda: now[0]) as progress:
        for done in range(1, 5):
            progress(done, 4)  # all within a second: nothing to say
    assert out.getvalue() == ""
    with Progress("reading", "files", out, every=10, clock=lambda: now[0]) as progress:
        for done in range(1, 31):
            now[0] += 1
            progress(done, 30)
    assert out.getvalue().splitlines() == [
        "reading: 10/30 files (33%), 10 s",
        "reading: 20/30 files (66%), 20 s",
        "reading: 30/30 files (100%), 30 s",
    ]


def test_spark_tasks_counts_the_stages_started_since_and_keeps_finished_ones() -> None:
    """Stages running at a poll, and every stage of the group's jobs since the start, also
    one that started and ended between two polls; not a stage a succeeded job skipped,
    nor another job's stage running before the start."""
    from types import SimpleNamespace

    class Tracker:
        active = [7]  # a stage of somebody else's job, running before the start
        infos: dict[int, tuple[int, int]] = {7: (0, 100)}
        jobs: dict[int, tuple[list[int], str]] = {1: ([7], "RUNNING")}

        def getActiveStageIds(self) -> list[int]:  # noqa: N802 (pyspark's names)
            return self.active

        def getStageInfo(self, stage: int) -> SimpleNamespace | None:  # noqa: N802
            done, total = self.infos[stage]
            return SimpleNamespace(numCompletedTasks=done, numTasks=total)

        def getJobIdsForGroup(self, group: str | None) -> list[int]:  # noqa: N802
            assert group is None
            return list(self.jobs)

        def getJobInfo(self, job: int) -> SimpleNamespace:  # noqa: N802
            stages, status = self.jobs[job]
            return SimpleNamespace(stageIds=stages, status=status)

    tracker = Tracker()
    tasks = SparkTasks(tracker)
    tracker.active, tracker.infos = [7, 8], {7: (50, 100), 8: (1, 4)}
    assert tasks.poll() == (1, 4)
    tracker.active, tracker.infos[8], tracker.infos[9] = [9], (4, 4), (0, 2)  # 8 finished
    assert tasks.poll() == (4, 6)
    # A job whose stage 10 ran and ended between polls; its stage 11 skipped.
    tracker.jobs[2] = ([10, 11], "SUCCEEDED")
    tracker.active, tracker.infos[10], tracker.infos[11] = [9], (3, 3), (0, 5)
    assert tasks.poll() == (7, 9)
