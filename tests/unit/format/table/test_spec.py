"""A table's definition (``format/table/spec.py``) loads light."""

from __future__ import annotations

import subprocess
import sys

DEFINITION = r"""
import sys
import dynbucket.format.table.spec
print(sorted(m for m in sys.modules if m.startswith("dynbucket.format.metadata.")
             or m.startswith("dynbucket.format.hudi.hfile")))
"""


def test_loading_a_definition_loads_no_metadata_reader_or_writer() -> None:
    """Everything that reads a table's definition (every service process, every slot's
    index source) imports ``spec.py``; the metadata table's reader and writer (HFile,
    the record index) load only where a version 9 table's metadata is read or written."""
    done = subprocess.run(
        [sys.executable, "-c", DEFINITION], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['dynbucket.format.metadata.partitions']"
