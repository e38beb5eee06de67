"""One writer process of the several-writers model (``tests/property/test_writers_model.py``).

``python -m tests.writers <table> <writer> <seed> <writes> <log> [flaky]``: opens the table
and, once ``<log>.go`` exists, makes ``writes`` change batches (upserts, some marked as
deletes) of keys every writer shares, each op with an ordering value no other op has; before
each write it logs the batch (``issued``), after the write returns the instant (``acked``),
flushed each time, so that what a killed writer had acknowledged is known. ``flaky``: the
network to the table fails now and then, and a write that raises a ``DynBucketError`` is
logged (``failed``) and the next one made; any other error ends the writer, as every error
does without it. Last, it prints how many requests it made again (``retried N``).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket import (
    ConcurrentWriteError,
    DynamicBucketIndex,
    DynBucketError,
    Table,
    TableOptions,
)
from dynbucket.format.storage import retrying
from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline.timeline import Timeline

SCHEMA = pa.schema(
    [("id", pa.string()), ("region", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
REGIONS = ["eu", "us", "ap"]
KEYS = 40
WRITERS_MAX = 8
WRITERS = 3
#: Each writer's writes; ``DYNBUCKET_WRITERS_WRITES`` more, to hunt a rare failure.
WRITES = int(os.environ.get("DYNBUCKET_WRITERS_WRITES", "8"))
HEARTBEAT = 2.0


def region_of(key: int) -> str:
    return REGIONS[key % len(REGIONS)]


def batch_of(rng: random.Random, writer: int, step: int) -> list[dict[str, Any]]:
    """Distinct keys; ts unique over every writer (``writer`` is its residue), growing with
    the step; about one op in five a delete."""
    keys = rng.sample(range(KEYS), rng.randrange(1, 10))
    return [
        {
            "id": f"k{k}",
            "region": region_of(k),
            "v": rng.randrange(10**6),
            "ts": ((step * 16 + j) * WRITERS_MAX) + writer,
            "deleted": rng.random() < 0.2,
        }
        for j, k in enumerate(keys)
    ]


def records(batch: list[dict[str, Any]]) -> pa.Table:
    table = pa.Table.from_pylist(batch, SCHEMA)
    return table.append_column(
        "_hoodie_is_deleted", pa.array([r["deleted"] for r in batch], pa.bool_())
    )


def main(argv: list[str]) -> None:
    path, writer, seed, writes, log = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    flaky = argv[5:] == ["flaky"]
    # Conflicts and retries, on stderr for the test to count.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s"
    )
    logging.getLogger("dynbucket.write.writer").setLevel(logging.INFO)
    # Settles, rollbacks and carries: what a failed model run's writer stderr shows.
    logging.getLogger("dynbucket.format.timeline.transaction").setLevel(logging.INFO)
    # Every commit's files, every clean's removals and every rollback, in a file beside
    # the log (stderr is a pipe the test reads once the writer ended: it would fill and
    # stall the writer): a failed run's history (``history``).
    debug = logging.FileHandler(log + ".debug")
    debug.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    for name in ("dynbucket.format", "dynbucket.write"):
        logging.getLogger(name).addHandler(debug)
    logging.getLogger().handlers[0].setLevel(logging.INFO)
    for name in ("dynbucket.format", "dynbucket.format.timeline.transaction"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    logging.getLogger("dynbucket.format.storage").setLevel(logging.INFO)
    table = Table.open(path)
    Path(log + ".ready").touch()
    while not os.path.exists(log + ".go"):  # every writer starts at once
        time.sleep(0.01)
    try:
        write_batches(table, writer, seed, writes, log, flaky=flaky)
    finally:
        table.close()
        print(f"retried {retrying.Counters.made_again()}", file=sys.stderr)


# --- the model run (the parent's side) ----------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def options(rng: random.Random) -> TableOptions:
    return TableOptions(
        table_type=rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"]),
        table_version=rng.choice([6, 9]),
        write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL",
        heartbeat_expiry_seconds=HEARTBEAT,
        commit_lease_seconds=1.0,
        compaction_delta_commits=2,
        clean_max_commits=2,
        cleaner_commits_retained=2,
        keep_min_commits=4,
        keep_max_commits=6,
    )


def _spawn(
    path: str, writer: int, seed: int, log: Path, endpoint: str | None
) -> subprocess.Popen[bytes]:
    args = [path, str(writer), str(seed), str(WRITES), str(log)]
    env = dict(os.environ)
    if endpoint is not None:  # a flaky network in front of the S3 test server
        args.append("flaky")
        env["AWS_ENDPOINT_URL"] = endpoint
    cmd = [sys.executable, "-m", "tests.writers", *args]
    # Into a file, not a pipe: a pipe read once the writer ended fills (64 KB: a flaky
    # network's warnings over 24 writes did) and stalls the writer in its next log line.
    with open(f"{log}.stderr", "wb") as err:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)


def _faults(
    rng: random.Random,
    procs: list[subprocess.Popen[bytes]],
    successor: Callable[[], subprocess.Popen[bytes]] | None,
) -> int | None:
    """SIGSTOPs (some past the heartbeat's expiry) and one SIGKILL, until every writer ends;
    returns the killed writer. A kill that leaves no writer alive (one writer, say) starts
    ``successor()``, appended to ``procs``: it rolls back the killed one's instant and writes
    on, so the run goes on past the kill."""
    killed = None
    while any(p.poll() is None for p in procs):
        time.sleep(rng.uniform(0.3, 1.5))
        alive = [i for i, p in enumerate(procs) if p.poll() is None]
        if not alive:
            break
        victim = rng.choice(alive)
        if killed is None and rng.random() < 0.1 * len(alive):  # each writer: 1 in 10
            procs[victim].send_signal(signal.SIGKILL)
            killed = victim
            if len(alive) == 1 and successor is not None:
                procs.append(successor())
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
        if not log.exists():
            continue  # killed before its first write
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


def run_model(
    uri: str,
    seed: int,
    logs_dir: Path,
    spark_writes: Callable[[Path], None] | None = None,
    writers: int = WRITERS,
    endpoint: str | None = None,
) -> Table:
    """Creates a table at ``uri``, runs ``writers`` writer processes on it (or one fewer and
    ``spark_writes(log)`` in this process, as the last writer: a Spark writer beside them)
    under SIGSTOPs and a SIGKILL (a successor starts if it killed the last one alive), and
    checks the table against the model (the module doc
    of ``tests/property/test_writers_model.py``); returns it, open. ``endpoint``: the
    writer processes reach the S3 test server there (a flaky network: the module doc)."""
    rng = random.Random(seed)
    cap = rng.choice([3, 5, 8])
    Table.create(
        uri, SCHEMA, "id", "region", "ts", DynamicBucketIndex(max_keys_per_bucket=cap), options(rng)
    ).close()
    logs = [logs_dir / f"writer{w}.log" for w in range(writers)]

    def successor() -> subprocess.Popen[bytes]:
        logs.append(logs_dir / f"writer{len(logs)}.log")
        Path(f"{logs[-1]}.go").touch()
        return _spawn(uri, len(logs) - 1, seed, logs[-1], endpoint)

    spawned = writers - 1 if spark_writes else writers
    procs = [_spawn(uri, w, seed, logs[w], endpoint) for w in range(spawned)]
    deadline = time.monotonic() + 120  # imports and Table.open, on a busy machine too
    while time.monotonic() < deadline and not all(
        Path(f"{logs[w]}.ready").exists() or procs[w].poll() is not None for w in range(spawned)
    ):
        time.sleep(0.05)
    for log in logs:
        Path(f"{log}.go").touch()
    try:
        if spark_writes is not None:
            beside = threading.Thread(target=spark_writes, args=(logs[-1],))
            beside.start()
        killed = _faults(rng, procs, successor if spark_writes is None else None)
        for p in procs:
            p.wait(timeout=300)
        if spark_writes is not None:
            beside.join(timeout=600)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    errors = [
        Path(f"{log}.stderr").read_text(errors="replace") if Path(f"{log}.stderr").exists() else ""
        for log in logs
    ]
    failed = [w for w, p in enumerate(procs) if w != killed and p.returncode != 0]
    if failed:
        _copy_table(uri, logs_dir / "as-left")
        raise AssertionError(
            f"{errors[failed[0]][-3000:]} (table and writer logs kept in {_keep(logs_dir)})"
        )
    conflicts = sum(e.count("after a conflict") for e in errors)
    gone = sum(e.count("a file this write read is gone") for e in errors)
    retried = sum(int(n) for e in errors for n in re.findall(r"^retried (\d+)$", e, re.M))
    failures = [
        json.loads(line)["failed"]
        for log in logs
        if log.exists()
        for line in log.read_text().splitlines()
        if line.startswith('{"failed"')
    ]
    print(
        f"writers run {seed}: written again {conflicts} time(s) after a conflict, "
        f"{gone} after a file they read went; {retried} request(s) made again, "
        f"{len(failures)} write(s) failed: {failures}; writer {killed} SIGKILLed"
    )
    if spark_writes is not None:
        assert logs[-1].exists() and "acked" in logs[-1].read_text().splitlines()[-1]
    time.sleep(HEARTBEAT + 0.5)  # the killed writer's instant is a dead one's now
    # As the writers left it, before the rollback of the dead one (an object store's
    # table is downloaded: the test server goes with the session).
    _copy_table(uri, logs_dir / "as-left")
    try:
        return _checked(uri, cap, logs)
    except AssertionError as e:
        _copy_table(uri, logs_dir / "after-check")
        found = re.match(r"k(\d+): ", str(e))
        told = history(logs_dir, region_of(int(found.group(1)))) if found else ""
        raise AssertionError(f"{e} (table and writer logs kept in {_keep(logs_dir)}){told}") from e


def history(logs_dir: Path, region: str, most: int = 15_000) -> str:
    """What the writers' debug logs say of ``region``'s partition, in time order: each
    commit's files there (with its compaction plan's ``writing`` and carries), each clean's
    removals there, each rollback and settle (CI keeps no folder: a failed run's message
    carries it)."""
    partition = f"region={region}/"
    lines = []
    for path in sorted(logs_dir.glob("writer*.log.debug")):
        writer = path.name.split(".")[0]
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("20"):
                continue  # a traceback's lines
            paths = re.findall("'([^']*" + re.escape(partition) + "[^']*)'", line)
            if "committed" in line or "removes" in line:
                if not paths:
                    continue
                head = line.split(": [")[0].split(" removes ")[0]
                extra = re.findall(r"'(writing|carried-logs)': (\[[^\]]*\])", line)
                names = [posixpath.basename(p) for p in paths]
                lines.append(f"{head[:23]} {writer} {head[24:]}: {names} {extra}")
            elif "rolled back" in line or "published" in line or "another executor" in line:
                lines.append(f"{line[:23]} {writer} {line[24:]}"[:400])
    text = "\n".join(sorted(lines))
    return f"\nhistory of {partition}:\n{text[-most:]}" if lines else ""


def _copy_table(uri: str, target: Path) -> None:
    store = TableStore.at(uri)
    pafs.copy_files(
        store.root,
        str(target),
        source_filesystem=store.fs,
        destination_filesystem=pafs.LocalFileSystem(),
    )


def _keep(logs_dir: Path) -> str:
    """A failed run's folder (a local table and the writers' logs), copied where pytest's
    rotation of its temporary folders does not remove it."""
    kept = Path(tempfile.gettempdir()) / f"dynbucket-writers-failed-{time.time_ns()}"
    shutil.copytree(logs_dir, kept)
    return str(kept)


def _checked(uri: str, cap: int, logs: list[Path]) -> Table:
    table = Table.open(uri)
    try:
        _check(table, cap, logs)
    except BaseException:
        table.close()
        raise
    return table


def _check(table: Table, cap: int, logs: list[Path]) -> None:
    for attempt in range(5):
        try:
            # The model's commit lease is 1 s: on a starved machine the check's own
            # rollback may lose it (typed, nothing committed), as a writer's commit may.
            table.rollback()
            break
        except ConcurrentWriteError:
            if attempt == 4:
                raise
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
    timeline = Timeline(table._store, table._spec.options.merge_on_read)
    horizons = [timeline.metadata(c).get("earliest-retained") for c in timeline.completed("clean")]
    assert horizons == sorted(horizons), f"a clean's horizon went back: {horizons}"


def write_batches(
    table: Table,
    writer: int,
    seed: int,
    writes: int,
    log: str,
    given: Callable[[pa.Table], Any] = lambda rows: rows,
    flaky: bool = False,
) -> None:
    """Writer ``writer``'s batches into ``table``, logged (the module doc); ``given`` makes
    the input of a batch's records (a Spark DataFrame: a Spark writer); ``flaky``: a write
    that raises a ``DynBucketError`` is logged and the next one made."""
    rng = random.Random(seed * 1000 + writer)
    with open(log, "a") as out:
        for step in range(writes):
            batch = batch_of(rng, writer, step)
            out.write(json.dumps({"issued": batch}) + "\n")
            out.flush()
            try:
                done = table.upsert(given(records(batch)))
            except DynBucketError as e:
                if not flaky:
                    raise
                out.write(json.dumps({"failed": f"{type(e).__name__}: {e}"[:300]}) + "\n")
                out.flush()
                continue
            out.write(json.dumps({"acked": step, "instant": done.instant}) + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
