"""A writer killed with SIGKILL after writing data and index files, before completing (I5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.actors.errors import TableCorruptedError
from dynbucket.pipeline.format.options import TableOptions
from dynbucket.pipeline.format.timeline import _METADATA
from dynbucket.pipeline.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])

CHILD = r"""
import sys, time
import pyarrow as pa
from dynbucket.pipeline.table import Table
from dynbucket.pipeline.format.timeline import Timeline

def stall(self, instant, metadata):
    print("WRITTEN", instant.id, flush=True)  # data and index files are on disk now
    time.sleep(3600)

Timeline.complete = stall
t = Table.open(sys.argv[1])
t.upsert(pa.table({"id": [f"n{i}" for i in range(50)] + ["a"], "day": ["d2"] * 50 + ["d1"],
                   "v": list(range(50)) + [99]}))
"""


def test_sigkill_before_completion_shows_nothing_and_is_rolled_back(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day",
                     options=TableOptions(lock_lease_seconds=1.0))  # fmt: skip
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2]}))
    before = t.to_arrow().sort_by("id")

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, t.uri], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line[0] == "WRITTEN", line
    dead = line[1]
    written = [p for p in Path(t.uri).rglob("*") if dead in p.name]
    assert any(".log." in p.name or p.parent.name == "day=d2" for p in written)
    assert any(".dynbucket/rli" in str(p) for p in written)  # index files too
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    # Readers see the previous snapshot exactly, and the dead instant as pending.
    reader = Table.open(t.uri)
    assert reader.to_arrow().sort_by("id").equals(before)
    assert [i.id for i in reader.timeline.pending()] == [dead]

    time.sleep(1.2)  # the dead writer's lease runs out
    result = reader.upsert(pa.table({"id": ["c"], "day": ["d1"], "v": [3]}))
    assert result.instant > dead
    assert not [p for p in Path(t.uri).rglob("*") if dead in p.name]
    assert reader.timeline.pending() == []
    assert sorted(reader.to_arrow(meta_columns=False).column("id").to_pylist()) == ["a", "b", "c"]
    # The dead instant's keys are unknown again (their index entries went with it).
    assert reader.insert(pa.table({"id": ["n1"], "day": ["d2"], "v": [0]})).keys_inserted == 1


def test_a_write_on_an_unreadable_latest_commit_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2]}))
    latest = t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [3]})).instant
    commit = Path(t.uri) / ".hoodie" / f"{latest}.deltacommit"
    commit.write_bytes(commit.read_bytes()[:100])  # cut short
    _METADATA.clear()  # this process parsed it before the damage
    def files() -> list[Path]:  # the lease is taken and given back: not a write
        return sorted(p for p in Path(t.uri).rglob("*") if "writer.lease" not in p.name)

    before = files()
    with pytest.raises(TableCorruptedError, match=rf"completed instant {latest} is not a "
                       r"complete JSON document.*delete it and run `dynbucket rollback`"):
        Table.open(t.uri).upsert(pa.table({"id": ["c"], "day": ["d2"], "v": [1]}))
    assert files() == before
