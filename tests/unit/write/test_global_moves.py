"""A global index's moves when the writer dies: SIGKILL around the commit point of an
instant that moves keys (a delete in each key's old file group, an insert in the new one).
Before the commit point readers see every key where it was, and the next write rolls the
move back; after it, the next write publishes it and every key is in its new partition.
Either way each key is in exactly one partition after the next write, for dynbucket and
hudi-rs, the index agrees (``check``), and the keys move again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket import DynamicBucketIndex, Table, TableOptions
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])

CHILD = r"""
import sys, time
import pyarrow as pa
from dynbucket.table import Table
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import Timeline

def stall(*args, **kwargs):
    print("WRITTEN", flush=True)  # data and index files are on disk now
    time.sleep(3600)

if sys.argv[2] == "before":
    outcome.decide_commit = stall  # before the commit point
else:
    Timeline.complete = stall  # decided, not yet published
t = Table.open(sys.argv[1])
ids = [f"k{i}" for i in range(40)]
t.upsert(pa.table({"id": ids, "day": ["d1"] * 40, "v": [1] * 40}), assigner_slots=2)
"""


def _days(t: Table) -> dict[str, str]:
    rows = t.to_arrow().to_pylist()
    assert len(rows) == len({r["id"] for r in rows})  # one row per key in the table
    return {r["id"]: r["day"] for r in rows}


@pytest.mark.sample(1)
@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_writer_killed_mid_move_leaves_each_key_in_one_partition(
    tmp_path: Path, point: str, table_type: str
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "v",
        DynamicBucketIndex(max_keys_per_bucket=8, global_index=True),
        TableOptions(lock_lease_seconds=1.0, table_type=table_type),
    )
    ids = [f"k{i}" for i in range(40)]
    t.upsert(pa.table({"id": ids, "day": ["d0"] * 40, "v": [0] * 40}), assigner_slots=2)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, t.uri, point], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().split() == ["WRITTEN"]
    reader = Table.open(t.uri)
    assert _days(reader) == dict.fromkeys(ids, "d0")  # the move is not seen
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    time.sleep(1.2)  # the dead writer's lease runs out
    reader.upsert(pa.table({"id": ["z"], "day": ["d2"], "v": [5]}))  # settles the dead one
    moved = point == "after"
    assert _days(reader) == {**dict.fromkeys(ids, "d1" if moved else "d0"), "z": "d2"}
    check_hudi_reads(reader, time_travel=False)
    assert reader.check().healthy
    # The slots bootstrap what the settled instant left: the keys move on from there.
    again = reader.upsert(pa.table({"id": ids, "day": ["d2"] * 40, "v": [2] * 40}))
    assert (again.keys_moved, again.keys_inserted) == (40, 0)
    assert _days(reader) == dict.fromkeys([*ids, "z"], "d2")
    check_hudi_reads(reader, time_travel=False)
    assert max(reader.stats().column("keys").to_pylist()) <= 8
