"""``dynbucket bench latency``: small upserts as an interactive user or a stream waits for them.

The workload (deterministic, Parquet files made before anything is timed): a table of S rows
(``bench upsert``'s rows: string keys, 8 partitions), then upserts of 1k, 10k and 100k rows,
each half updates of distinct existing keys and half new keys, with ordering values that
only grow (a stream's). Every system applies the same file in turn, in three cases:

* ``first``: the first write of a new driver process. The process starts, brings up its
  engine (``Runtime``: Ray and Spark), and the write is timed from there: for dynbucket
  ``Table.open`` plus the upsert, for Spark the write. The process's whole time is kept too.
  dynbucket writes a copy of the table made after loading (another writer's commits would
  otherwise retire the warm driver's actors), the others their one table.
* ``warm``: this process, after a write of the same size that is not counted.
* ``idle``: this process, its last write at least ``idle`` seconds ago (2 minutes: Spark stops
  Python workers idle for a minute). The ``first`` cases run during the wait, and the wait
  goes on after them, at least ``SETTLE_S`` seconds.

Systems: ``dynbucket`` (``Table.upsert`` of ``spark.read.parquet(file)``; Spark DataFrames this
small are written by the driver, ``write/driver.py``), ``spark`` (plain Spark appending the
same rows as Parquet, partitioned: no index, no merge, no commit protocol), ``delta``
(delta-rs ``MERGE``) and ``paimon`` (pypaimon, a primary-key table with ``bucket = -1``), the
last two in their own environment (``peer_worker.py``): a process per ``first`` write, one
long-lived process for the others. Each timing covers reading the input file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.bench.upsert import LOAD_CHUNK, WORKER, peers_python, records
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime
from dynbucket.table import Table

SYSTEMS = ("dynbucket", "spark", "delta", "paimon")
LABELS = {
    "dynbucket": "dynbucket",
    "spark": "plain spark",
    "delta": "delta-rs MERGE",
    "paimon": "pypaimon (bucket=-1)",
}
CASES = ("first", "warm", "idle")
#: Seconds of quiet after the ``first`` writes' processes end, before an ``idle`` write.
SETTLE_S = 20.0
#: Where a new process's first write goes: dynbucket into the copy made after loading (the
#: warm driver's actors stay current), plain Spark into a folder of its own; the peers into
#: their one table.
FIRST_WRITES_INTO = {"dynbucket": "dynbucket-first", "spark": "spark-first"}


# --- the workload ----------------------------------------------------------------------------


def workload(
    folder: Path, table_rows: int, sizes: Sequence[int], runs: int, seed: int = 13
) -> dict[tuple[int, str], list[Path]]:
    """Load files, then per size and case the upsert files, in the order they are applied."""
    plan = {
        (n, case): [folder / f"u{n}-{case}-{i}.parquet" for i in range(_files_of(case, runs))]
        for n in sizes
        for case in CASES
    }
    if (folder / "done").exists():
        return plan
    folder.mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, table_rows, LOAD_CHUNK)):
        pq.write_table(
            records(np.arange(start, min(table_rows, start + LOAD_CHUNK)), 0),
            folder / f"load-{i:03d}.parquet",
        )
    rng = np.random.default_rng(seed)
    next_key, ts = table_rows, 1
    for (n, _case), files in plan.items():
        for f in files:
            old = rng.choice(table_rows, n // 2, replace=False)
            new = np.arange(next_key, next_key + n - n // 2)
            next_key += len(new)
            pq.write_table(records(rng.permutation(np.concatenate([old, new])), ts), f)
            ts += 1
    (folder / "done").write_text("")
    return plan


def _files_of(case: str, runs: int) -> int:
    return runs + 1 if case == "warm" else runs  # warm: one write to warm up, not counted


# --- the systems -----------------------------------------------------------------------------


class Ours:
    """dynbucket in this driver: a Spark DataFrame read from the file, ``Table.upsert``."""

    def __init__(self, rt: Runtime, table_dir: Path, bucket_rows: int) -> None:
        self.rt, self.dir, self.bucket_rows = rt, table_dir, bucket_rows
        self.table: Table | None = None

    def load(self, files: Sequence[Path]) -> None:
        index = DynamicBucketIndex(max_keys_per_bucket=self.bucket_rows)
        with Table.create(
            str(self.dir), pq.read_schema(files[0]), "key", "part", "ts", index, runtime=self.rt
        ) as table:
            for f in files:
                table.upsert(self.rt.spark.read.parquet(str(f)))

    def open(self) -> None:
        self.table = Table.open(str(self.dir), runtime=self.rt)

    def upsert(self, f: Path) -> float:
        assert self.table is not None
        table, spark = self.table, self.rt.spark
        return timed(lambda: table.upsert(spark.read.parquet(str(f))))[0]

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


class PlainSpark:
    """Spark appending the rows as Parquet partitioned like the table, nothing else."""

    def __init__(self, rt: Runtime, out: Path) -> None:
        self.rt, self.out = rt, out

    def upsert(self, f: Path) -> float:
        def write() -> None:
            df = self.rt.spark.read.parquet(str(f))
            df.write.mode("append").partitionBy("part").parquet(str(self.out))

        return timed(write)[0]

    def close(self) -> None:
        pass


class Peer:
    """delta-rs or pypaimon: one long-lived ``peer_worker.py serve`` process for warm and idle
    writes; ``first`` writes start a process of their own."""

    def __init__(self, python: Path, system: str, table_dir: Path, bucket_rows: int) -> None:
        self.python, self.system, self.dir = python, system, table_dir
        self.env = dict(os.environ, BENCH_BUCKET_ROWS=str(bucket_rows))
        self.env.pop("PYTHONPATH", None)
        self.server: subprocess.Popen[str] | None = None

    def _args(self, operation: str, files: Sequence[Path]) -> list[str]:
        return [
            str(self.python),
            str(WORKER),
            self.system,
            str(self.dir),
            operation,
            *map(str, files),
        ]

    def call(self, operation: str, files: Sequence[Path]) -> dict[str, Any]:
        out = subprocess.run(
            self._args(operation, files), env=self.env, capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            raise RuntimeError(f"{self.system} {operation} failed:\n{out.stderr[-3000:]}")
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    def load(self, files: Sequence[Path]) -> None:
        self.call("load", files)

    def upsert(self, f: Path) -> float:
        if self.server is None:
            self.server = subprocess.Popen(
                self._args("serve", []),
                env=self.env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(f"{f}\n")
        self.server.stdin.flush()
        line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.system} server ended (exit {self.server.wait()})")
        return float(json.loads(line)["seconds"])

    def close(self) -> None:
        if self.server is not None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            self.server.wait(timeout=60)
            self.server = None


# --- first writes, each in a new driver process ----------------------------------------------


def first_write(system: str, target: str, f: str) -> dict[str, float]:
    """In a new process (``python -m dynbucket.bench.latency``): the engine up, then
    the timed first write; returns its seconds and the process's seconds until then."""
    born = time.perf_counter()
    with Runtime() as rt:
        if system == "dynbucket":

            def write() -> None:
                with Table.open(target, runtime=rt) as table:
                    table.upsert(rt.spark.read.parquet(f))

        else:

            def write() -> None:
                rt.spark.read.parquet(f).write.mode("append").partitionBy("part").parquet(target)

        seconds = timed(write)[0]
        return {"seconds": seconds, "process_seconds": time.perf_counter() - born}


def _first(system: str, target: Path, f: Path, peer: Peer | None) -> dict[str, Any]:
    if peer is not None:
        return peer.call("upsert", [f])
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)  # its own embedded Ray, as a new driver on this machine
    out = subprocess.run(
        [sys.executable, "-m", "dynbucket.bench.latency", system, str(target), str(f)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"first write of {system} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# --- the run ---------------------------------------------------------------------------------


def run(
    rt: Runtime,
    table_rows: int,
    sizes: Sequence[int],
    runs: int,
    idle: float,
    systems: Sequence[str],
    workdir: str | None,
    bucket_rows: int,
) -> dict[str, Any]:
    """Builds the workload and the tables, times every cell, prints the report."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="dynbucket-latency-"))
    python = peers_python() if {"delta", "paimon"} & set(systems) else None
    tables = base / "tables"
    shutil.rmtree(tables, ignore_errors=True)
    tables.mkdir(parents=True)
    print(
        f"workload: {table_rows:,}-row table; upserts of {', '.join(map(str, sizes))} rows "
        "(half updates)",
        flush=True,
    )
    plan = workload(
        base / f"workload-{table_rows}-{'-'.join(map(str, sizes))}x{runs}", table_rows, sizes, runs
    )
    loads = sorted(next(iter(plan.values()))[0].parent.glob("load-*.parquet"))
    seconds: dict[tuple[str, int, str], list[float]] = {}
    process: dict[tuple[str, int], list[float]] = {}
    running: dict[str, Ours | PlainSpark | Peer] = {}
    try:
        for system in systems:
            print(f"loading {LABELS[system]} ...", flush=True)
            running[system] = _load(system, rt, tables, loads, bucket_rows, python)
        if "dynbucket" in running:  # the first writes' copy, as loaded
            shutil.copytree(tables / "dynbucket", tables / FIRST_WRITES_INTO["dynbucket"])
            ours = running["dynbucket"]
            assert isinstance(ours, Ours)
            ours.open()
        for n in sizes:
            order = list(running)
            for i, f in enumerate(plan[(n, "warm")]):  # warm: turns, the first not counted
                for system in _turn(order, i):
                    s = running[system].upsert(f)
                    if i:
                        seconds.setdefault((system, n, "warm"), []).append(s)
            print(f"  warm {n:,}: " + _line(seconds, n, "warm"), flush=True)
            for i, f in enumerate(plan[(n, "idle")]):
                quiet_since = time.monotonic()
                for system in _turn(order, i):  # first writes while this driver idles
                    target = tables / FIRST_WRITES_INTO.get(system, system)
                    sut = running[system]
                    got = _first(
                        system,
                        target,
                        plan[(n, "first")][i],
                        sut if isinstance(sut, Peer) else None,
                    )
                    seconds.setdefault((system, n, "first"), []).append(got["seconds"])
                    if "process_seconds" in got:
                        process.setdefault((system, n), []).append(got["process_seconds"])
                # The machine settles after the new processes' engines stop, however long
                # they took, and this driver has been idle at least ``idle`` seconds.
                time.sleep(max(SETTLE_S, idle - (time.monotonic() - quiet_since)))
                for system in _turn(order, i):
                    seconds.setdefault((system, n, "idle"), []).append(running[system].upsert(f))
            print(f"  first {n:,}: " + _line(seconds, n, "first"), flush=True)
            print(f"  idle {n:,}: " + _line(seconds, n, "idle"), flush=True)
    finally:
        for sut in running.values():
            sut.close()
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
    rows = [
        Measurement(
            f"{LABELS[system]} {case} {n // 1000}k",
            n,
            secs,
            {
                "system": system,
                "case": case,
                **(
                    {"process_s_median": round(float(np.median(process[(system, n)])), 3)}
                    if case == "first" and (system, n) in process
                    else {}
                ),
            },
        )
        for (system, n, case), secs in seconds.items()
    ]
    return print_report(
        "latency", "rows", rows, **summary(seconds, sizes), idle_s=idle, table_rows=table_rows
    )


def _load(
    system: str,
    rt: Runtime,
    tables: Path,
    loads: Sequence[Path],
    bucket_rows: int,
    python: Path | None,
) -> Ours | PlainSpark | Peer:
    if system == "dynbucket":
        ours = Ours(rt, tables / "dynbucket", bucket_rows)
        ours.load(loads)
        return ours
    if system == "spark":
        return PlainSpark(rt, tables / "spark")
    if python is None:
        raise ValueError(f"system {system!r}: the peers' environment was not created")
    peer = Peer(python, system, tables / system, bucket_rows)
    peer.load(loads)
    return peer


def _turn(order: list[str], i: int) -> list[str]:
    """The systems in turn, the first of them changing each time (none always goes first)."""
    k = i % len(order)
    return order[k:] + order[:k]


def _line(seconds: dict[tuple[str, int, str], list[float]], n: int, case: str) -> str:
    return ", ".join(
        f"{s} {np.median(v):.3f}s" for (s, m, c), v in seconds.items() if m == n and c == case
    )


def summary(
    seconds: dict[tuple[str, int, str], list[float]], sizes: Sequence[int]
) -> dict[str, float]:
    """Ratios of medians of this run: ours against plain Spark in the same case, idle and
    first against warm, and the peers' time against ours."""
    med = {k: float(np.median(v)) for k, v in seconds.items() if v}
    out: dict[str, float] = {}
    for n in sizes:
        tag = f"{n // 1000}k"
        for case in CASES:
            ours = med.get(("dynbucket", n, case))
            if ours is None:
                continue
            if ("spark", n, case) in med:  # our time / plain Spark's (goal <= 1.2 / 1.3)
                out[f"{case}_vs_spark_{tag}"] = round(ours / med[("spark", n, case)], 3)
            for peer in ("delta", "paimon"):  # their time / ours
                if (peer, n, case) in med:
                    out[f"{case}_speedup_vs_{peer}_{tag}"] = round(med[(peer, n, case)] / ours, 3)
        warm = med.get(("dynbucket", n, "warm"))
        if warm and ("dynbucket", n, "idle") in med:  # goal <= 1.3
            out[f"idle_vs_warm_{tag}"] = round(med[("dynbucket", n, "idle")] / warm, 3)
    return out


if __name__ == "__main__":
    name, target_path, file_path = sys.argv[1:4]
    print(json.dumps(first_write(name, target_path, file_path)))
