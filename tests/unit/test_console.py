"""The quiet console: only dynbucket's own output on the terminal, to the process's end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
