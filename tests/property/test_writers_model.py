"""Several writer processes on one table at once, against a model of what they acknowledged.

Three processes (``tests/writers.py``) write change batches of keys they all share into one
table with ``hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL``, services on,
while this test SIGSTOPs them (shorter and longer than their heartbeat's expiry) and
SIGKILLs one at a random point. Every op has an ordering value no other op has, so the
model is not one order: writers commit in an order nobody records, and a delete then an
older upsert brings a key back (as Hudi's writers do) where the other order leaves it
deleted. So each key's row must be one that some order of the committed ops gives, each
writer's own ops in its order (an op that was issued and not acknowledged may or may not
have committed); an acknowledged op is always among them. After all: no writer but the
killed one failed, one row per key, each key's row one the model allows (no acknowledged
op lost), no bucket over capacity, ``check`` healthy and hudi-rs reading the same.

``DYNBUCKET_WRITERS_RUNS`` runs more seeds (the suite runs two).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dynbucket import DynamicBucketIndex, Table, TableOptions
from tests.hudi_readers import check_hudi_reads
from tests.writers import SCHEMA, region_of

RUNS = int(os.environ.get("DYNBUCKET_WRITERS_RUNS", "2"))
WRITERS = 3
WRITES = 8
HEARTBEAT = 2.0
ROOT = Path(__file__).resolve().parents[2]
CONFLICTS: list[int] = []  # per run: writes run again after a conflict (a figure)


def _options(rng: random.Random) -> TableOptions:
    return TableOptions(
        table_type=rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"]),
        write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL",
        heartbeat_expiry_seconds=HEARTBEAT,
        commit_lease_seconds=1.0,
        compaction_delta_commits=2,
        clean_max_commits=2,
        cleaner_commits_retained=2,
        keep_min_commits=4,
        keep_max_commits=6,
    )


def _spawn(path: str, writer: int, seed: int, log: Path) -> subprocess.Popen[bytes]:
    args = [path, str(writer), str(seed), str(WRITES), str(log)]
    cmd = [sys.executable, "-m", "tests.writers", *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _faults(rng: random.Random, procs: list[subprocess.Popen[bytes]]) -> int | None:
    """SIGSTOPs (some past the heartbeat's expiry) and one SIGKILL, until every writer ends;
    returns the killed writer."""
    killed = None
    while any(p.poll() is None for p in procs):
        time.sleep(rng.uniform(0.3, 1.5))
        alive = [i for i, p in enumerate(procs) if p.poll() is None]
        if not alive:
            break
        victim = rng.choice(alive)
        if killed is None and rng.random() < 0.3:
            procs[victim].send_signal(signal.SIGKILL)
            killed = victim
            continue
        procs[victim].send_signal(signal.SIGSTOP)
        time.sleep(rng.choice([0.2, HEARTBEAT + 1.0]))
        procs[victim].send_signal(signal.SIGCONT)
    return killed


Op = tuple[int, int, bool, bool]  # (ts, v, deleted, acknowledged)
State = tuple[int, int] | None  # the key's row: (ts, v), or none


def _ops(logs: list[Path]) -> dict[str, list[list[Op]]]:
    """Key -> each writer's ops on it, in the writer's order."""
    out: dict[str, list[list[Op]]] = {}
    for w, log in enumerate(logs):
        batch: list[dict[str, Any]] = []
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        for i, entry in enumerate(lines):
            if "issued" not in entry:
                continue
            batch = entry["issued"]
            acknowledged = i + 1 < len(lines) and "acked" in lines[i + 1]
            for op in batch:
                per = out.setdefault(op["id"], [[] for _ in logs])
                per[w].append((op["ts"], op["v"], op["deleted"], acknowledged))
    return out


def _apply(state: State, op: Op) -> State:
    """One committed op, as a single writer applies it: the larger ordering value wins (a
    delete that loses is stale); a deleted key takes any record again."""
    ts, v, deleted, _ = op
    if state is not None and ts < state[0]:
        return state
    return None if deleted else (ts, v)


def _possible(per_writer: list[list[Op]]) -> set[State]:
    """The rows some order of the committed ops leaves (each writer's ops in its order; an
    op not acknowledged may be left out)."""
    memo: dict[tuple[tuple[int, ...], State], set[State]] = {}

    def walk(pos: tuple[int, ...], state: State) -> set[State]:
        key = (pos, state)
        if key in memo:
            return memo[key]
        out: set[State] = set()
        ended = True
        for w, ops in enumerate(per_writer):
            if pos[w] == len(ops):
                continue
            ended = False
            op = ops[pos[w]]
            nxt = pos[:w] + (pos[w] + 1,) + pos[w + 1 :]
            out |= walk(nxt, _apply(state, op))
            if not op[3]:
                out |= walk(nxt, state)
        if ended:
            out.add(state)
        memo[key] = out
        return out

    return walk(tuple(0 for _ in per_writer), None)


@pytest.mark.parametrize("seed", range(RUNS))
def test_several_writers_match_the_model(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    cap = rng.choice([3, 5, 8])
    Table.create(path, SCHEMA, "id", "region", "ts", DynamicBucketIndex(max_keys_per_bucket=cap),
                 _options(rng)).close()  # fmt: skip
    logs = [tmp_path / f"writer{w}.log" for w in range(WRITERS)]
    procs = [_spawn(path, w, seed, logs[w]) for w in range(WRITERS)]
    time.sleep(1.5)  # imports and Table.open
    for log in logs:
        Path(f"{log}.go").touch()
    try:
        killed = _faults(rng, procs)
        for p in procs:
            p.wait(timeout=300)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    errors = [p.stderr.read().decode() if p.stderr else "" for p in procs]
    for w, p in enumerate(procs):
        if w != killed:
            assert p.returncode == 0, errors[w][-3000:]
    CONFLICTS.append(sum(e.count("after a conflict") for e in errors))
    print(f"writers run {seed}: {CONFLICTS[-1]} write(s) written again, killed {killed}")
    time.sleep(HEARTBEAT + 0.5)  # the killed writer's instant is a dead one's now
    table = Table.open(path)
    table.rollback()
    table.wait_for_services()

    ops = _ops(logs)
    rows = table.to_arrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a key has two rows"
    by_key = {r["id"]: r for r in rows}
    assert set(by_key) <= set(ops)
    for key, per_writer in sorted(ops.items()):
        row = by_key.get(key)
        found = (row["ts"], row["v"]) if row is not None else None
        assert found in _possible(per_writer), f"{key}: {found}, ops {per_writer}"
        if row is not None:
            assert row["region"] == region_of(int(key[1:]))
    per_bucket = [r["keys"] for r in table.stats().to_pylist()]
    assert max(per_bucket, default=0) <= cap
    report = table.check()
    assert report.healthy, [str(f) for f in report.findings]
    check_hudi_reads(table, time_travel=False)
    table.close()
