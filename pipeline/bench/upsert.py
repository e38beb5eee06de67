"""``dynbucket bench upsert``: a 1M-row upsert into 5M- and 50M-row tables, against peers.

The workload (deterministic, generated as Parquet files before anything is timed):

* a table of S rows (string keys, 8 partitions, an int value, an ordering field, a note),
  loaded in 5M-row commits;
* four upsert files of 1M rows each: half updates of distinct existing keys, half new keys.
  Upsert 0 is the first write after the table is opened (dynbucket's actors bootstrap their
  caches from the record-level index then) and is reported on its own; upserts 1-3 are the
  steady state of a stream, and their median is the figure.

Every system applies the same files in the same order, the systems taking turns on each file
(so that none runs on a machine the others warmed up; pypaimon, a minute per upsert, runs
its four after the others); each timing covers reading the input Parquet file and the whole
write and commit. The table services a dynbucket write makes due (compactions) run after it,
untimed, before the next system's turn (their seconds are printed): beside the next turn
they would slow that system instead:

* ``dynbucket``: ``Table.upsert(spark.read.parquet(file))``, on this process's runtime, into
  a merge-on-read Hudi table; ``dynbucket-nometa``: the same without Hudi's meta fields
  (``hoodie.populate.meta.fields=false``), for their cost; ``dynbucket-v9``: the same in a
  table of version 9, whose metadata table lists its files (``table_version=9``), for
  the metadata table's cost (``inprocess-v9`` likewise in process); ``dynbucket-two-stage``:
  the same with the Spark job in two Python stages (tag where the rows are, shuffle by file
  group, write), as writes larger than ``RuntimeConfig.spark_one_stage_max_bytes`` run;
* ``spark (same layout)``: plain Spark writing the same rows to one Parquet file per
  (partition, bucket), with as many buckets per partition as dynbucket has: a write with no
  index, no merge and no commit protocol (the floor of a Spark writer);
* ``dynbucket in process``: ``Table.upsert`` of a pyarrow Table read from the file, in this
  process (no Spark, no actors); ``floor``: pyarrow writing the same rows in that table's
  (partition, bucket) layout, files in as many threads as cores (the floor of the write's
  own work);
* ``delta-rs MERGE``: delta-rs ``MERGE`` on (partition, key), larger ``ts`` wins;
* ``pypaimon``: a Paimon primary-key table in dynamic bucket mode (``bucket = -1``), written
  by pypaimon (pure Python, the default install).

The peers run in a virtual environment of their own, created by the first run (pypaimon
pins pyarrow < 20), as subprocesses of ``peer_worker.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.options import DynamicBucketIndex, TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write.results import WriteResult

PEERS = ("pypaimon==2.1.0", "deltalake==1.6.6")
LABELS = {
    "dynbucket": "dynbucket",
    "dynbucket-nometa": "dynbucket (no meta fields)",
    "dynbucket-v9": "dynbucket (table version 9)",
    "dynbucket-two-stage": "dynbucket (Spark job in two stages)",
    "inprocess-v9": "dynbucket in process (table version 9)",
    "spark": "spark (same layout)",
    "inprocess": "dynbucket in process (pyarrow)",
    "inprocess-partial": "dynbucket in process, partial (no note)",
    "floor": "floor (pyarrow, same layout)",
    "delta": "delta-rs MERGE",
    "paimon": "pypaimon (bucket=-1)",
}
PARTITIONS = 8
LOAD_CHUNK = 5_000_000
WORKER = Path(__file__).with_name("peer_worker.py")


# --- the workload ----------------------------------------------------------------------------


def records(ids: np.ndarray, ts: int) -> pa.Table:
    """The rows of keys ``ids``: a key's partition and value depend on the key only."""
    ids_a = pa.array(ids, pa.int64())
    part = pc.bit_wise_and(pc.multiply(ids_a, 2654435761), PARTITIONS - 1)
    return pa.table(
        {
            "key": pc.binary_join_element_wise("key-", pc.cast(ids_a, pa.string()), ""),
            "part": pc.binary_join_element_wise("p", pc.cast(part, pa.string()), ""),
            "v": pc.add(pc.multiply(ids_a, 3), ts),
            "ts": pa.array(np.full(len(ids), ts, np.int64)),
            "note": pc.binary_join_element_wise(
                "note-", pc.cast(pc.bit_wise_and(ids_a, 1023), pa.string()), ""
            ),
        }
    )


def workload(folder: Path, size: int, upsert_rows: int, upserts: int, seed: int = 11) -> None:
    """Base files (``load-*.parquet``) and upsert files (``upsert-*.parquet``) in ``folder``."""
    if (folder / "done").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, size, LOAD_CHUNK)):
        pq.write_table(
            records(np.arange(start, min(size, start + LOAD_CHUNK)), 0),
            folder / f"load-{i:03d}.parquet",
        )
    rng = np.random.default_rng(seed)
    updates = rng.choice(size, (upserts, upsert_rows // 2), replace=True)
    for r in range(upserts):
        old = np.unique(updates[r])
        new = np.arange(size + r * upsert_rows, size + r * upsert_rows + upsert_rows - len(old))
        ids = rng.permutation(np.concatenate([old, new]))
        pq.write_table(records(ids, r + 1), folder / f"upsert-{r}.parquet")
    (folder / "done").write_text("")


def _files(folder: Path, prefix: str) -> list[Path]:
    """The workload's files of ``prefix`` in the order they were made: by their number, so
    that ``upsert-10`` comes after ``upsert-9`` (by name it came after ``upsert-1``, and an
    11th upsert's ordering values went back below the table's: with ``--runs`` 10 or more,
    its updates turned stale and the systems read slices to tell)."""
    return sorted(folder.glob(f"{prefix}-*.parquet"), key=lambda p: int(p.stem.rpartition("-")[2]))


# --- the systems -----------------------------------------------------------------------------


class Ours:
    """dynbucket: ``Table.upsert`` of a Spark DataFrame read from the file (a merge-on-read
    Hudi table, with or without Hudi's meta fields)."""

    def __init__(
        self,
        rt: Runtime,
        table_dir: Path,
        bucket_rows: int,
        meta: bool = True,
        version: int = 6,
        one_stage: bool = True,
    ) -> None:
        self.rt, self.dir, self.bucket_rows, self.meta = rt, table_dir, bucket_rows, meta
        self.version, self.one_stage = version, one_stage
        self.table: Table | None = None

    def load(self, files: Sequence[Path]) -> None:
        spark = self.rt.spark
        index = DynamicBucketIndex(max_keys_per_bucket=self.bucket_rows)
        table = Table.create(
            str(self.dir),
            pq.read_schema(files[0]),
            "key",
            "part",
            "ts",
            index,
            TableOptions(populate_meta_fields=self.meta, table_version=self.version),
            runtime=self.rt,
        )
        with table:
            for f in files:
                table.upsert(spark.read.parquet(str(f)))
        self.table = Table.open(str(self.dir), runtime=self.rt)  # cold caches, as a new driver
        if not self.one_stage:  # the runtime's limit, for this table alone
            self.table._spark_writer().one_stage_max_bytes = 0

    def upsert(self, f: Path) -> float:
        assert self.table is not None
        table, spark = self.table, self.rt.spark
        s, result = timed(lambda: table.upsert(spark.read.parquet(str(f))))
        label = "dynbucket" if self.meta else "dynbucket (no meta fields)"
        label += f" v{self.version}" if self.version != 6 else ""
        label += "" if self.one_stage else " (two stages)"
        services = timed(table.wait_for_services)[0]  # untimed: not in the next turn
        _print_write(f"{label} {f.name}", s, result, "stages (summed over tasks)", services)
        return s

    def buckets_per_partition(self) -> int:
        assert self.table is not None
        return _buckets_per_partition(self.table)

    def close(self) -> None:
        if self.table is not None:
            self.table.close()


class InProcess:
    """dynbucket's in-process writer: ``Table.upsert`` of a pyarrow Table read from the file
    (no Spark, no actors: one assigner core in this process, file groups in threads).
    ``partial``: the same upserts without the ``note`` field, ``partial=True`` (a known key
    keeps its note: the writer reads it from the key's file group)."""

    def __init__(
        self, table_dir: Path, bucket_rows: int, partial: bool = False, version: int = 6
    ) -> None:
        self.dir, self.bucket_rows, self.partial = table_dir, bucket_rows, partial
        self.version = version
        self.table: Table | None = None

    def load(self, files: Sequence[Path]) -> None:
        index = DynamicBucketIndex(max_keys_per_bucket=self.bucket_rows)
        options = TableOptions(table_version=self.version)
        schema = pq.read_schema(files[0])
        table = Table.create(str(self.dir), schema, "key", "part", "ts", index, options)
        for f in files:
            data = pq.read_table(f)
            for start in range(0, data.num_rows, 1_000_000):
                table.upsert(data.slice(start, 1_000_000))
        self.table = Table.open(str(self.dir))  # cold cache, as a new process

    def upsert(self, f: Path) -> float:
        assert self.table is not None
        table = self.table
        if self.partial:
            data = pq.read_table(f).drop_columns(["note"])
            s, result = timed(lambda: table.upsert(data, partial=True))
        else:
            s, result = timed(lambda: table.upsert(pq.read_table(f)))
        label = f"in process{' partial' * self.partial}{f' v{self.version}' * (self.version != 6)}"
        services = timed(table.wait_for_services)[0]  # untimed: not in the next turn
        _print_write(f"{label} {f.name}", s, result, "stages", services)
        return s

    def buckets_per_partition(self) -> int:
        assert self.table is not None
        return _buckets_per_partition(self.table)

    def close(self) -> None:
        pass


class Floor:
    """pyarrow writing the upsert's rows as Parquet in the in-process table's layout (one
    file per partition and bucket, a bucket by key hash), files written by as many threads
    as cores: no index, no merge, no commit protocol."""

    def __init__(self, out: Path, ours: InProcess | None) -> None:
        self.out, self.ours = out, ours
        self.buckets = 1
        self.count = 0

    def load(self, files: Sequence[Path]) -> None:
        if self.ours is not None:
            self.buckets = self.ours.buckets_per_partition()

    def upsert(self, f: Path) -> float:
        self.count += 1
        s = timed(lambda: self._write(pq.read_table(f), self.out / f"u{self.count}"))[0]
        print(f"  floor {f.name}: {s:.2f}s ({self.buckets} buckets per partition)", flush=True)
        return s

    def _write(self, rows: pa.Table, folder: Path) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from dynbucket.base.keyhash import hash_columns

        parts = pc.dictionary_encode(rows.column("part")).combine_chunks()
        buckets = np.mod(hash_columns([rows.column("key")], ["key"]), self.buckets)
        group = parts.indices.to_numpy().astype(np.int64) * self.buckets + buckets
        order = np.argsort(group.astype(np.uint16), kind="stable")
        rows, group = rows.take(pa.array(order)), group[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], len(group)]

        def write(a: int, b: int) -> None:
            where = folder / f"part={parts.dictionary[int(group[a]) // self.buckets]}"
            where.mkdir(parents=True, exist_ok=True)
            name = f"bucket-{group[a] % self.buckets}.parquet"
            pq.write_table(rows.slice(a, b - a), where / name)

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(write, starts, ends))

    def close(self) -> None:
        pass


def _print_write(
    label: str, seconds: float, result: WriteResult, stages: str, services: float
) -> None:
    """Prints a write and the seconds the services it made due took after it (the caller
    waits for them, untimed: beside the next system's turn they would slow that one)."""
    print(
        f"  {label}: {seconds:.2f}s ({result.keys_updated:,} updated, "
        f"{result.keys_inserted:,} inserted; its services after it {services:.2f}s)\n"
        f"    steps {result.seconds}\n    {stages} {result.stages}",
        flush=True,
    )


def _buckets_per_partition(table: Table) -> int:
    stats = table.stats()
    return int(pc.max(pc.value_counts(stats.column("partition")).field("counts")).as_py())


class PlainSpark:
    """Spark writing the rows to one Parquet file per (partition, bucket), nothing else."""

    def __init__(self, rt: Runtime, out: Path, ours: Ours | None) -> None:
        self.rt, self.out, self.ours = rt, out, ours
        self.buckets = 1

    def load(self, files: Sequence[Path]) -> None:
        if self.ours is not None:  # as many buckets per partition as dynbucket has
            self.buckets = self.ours.buckets_per_partition()

    def upsert(self, f: Path) -> float:
        from pyspark.sql import functions as F

        def write() -> None:
            df = self.rt.spark.read.parquet(str(f))
            bucketed = df.withColumn("bucket", F.pmod(F.xxhash64("key"), F.lit(self.buckets)))
            (
                bucketed.repartition("part", "bucket")
                .write.mode("append")
                .partitionBy("part", "bucket")
                .parquet(str(self.out))
            )

        s = timed(write)[0]
        print(f"  spark {f.name}: {s:.2f}s ({self.buckets} buckets per partition)", flush=True)
        return s

    def close(self) -> None:
        pass


class Peer:
    """delta-rs or pypaimon, one subprocess of ``peer_worker.py`` per operation."""

    def __init__(self, python: Path, system: str, table_dir: Path, bucket_rows: int) -> None:
        self.python, self.system, self.dir = python, system, table_dir
        self.env = dict(os.environ, BENCH_BUCKET_ROWS=str(bucket_rows))
        self.env.pop("PYTHONPATH", None)

    def _call(self, operation: str, files: Sequence[Path]) -> float:
        out = subprocess.run(
            [
                str(self.python),
                str(WORKER),
                self.system,
                str(self.dir),
                operation,
                *map(str, files),
            ],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{self.system} {operation} failed:\n{out.stderr[-3000:]}")
        return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])

    def load(self, files: Sequence[Path]) -> None:
        self._call("load", files)

    def upsert(self, f: Path) -> float:
        s = self._call("upsert", [f])
        print(f"  {self.system} {f.name}: {s:.2f}s", flush=True)
        return s

    def close(self) -> None:
        pass


def peers_python(cache: Path | None = None) -> Path:
    """The peers' interpreter, in a virtual environment created on first use."""
    root = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dynbucket"
    tag = hashlib.sha1(" ".join(PEERS).encode()).hexdigest()[:10]
    env_dir = root / f"bench-peers-{tag}"
    python = env_dir / "bin" / "python"
    if not (env_dir / "ready").exists():
        shutil.rmtree(env_dir, ignore_errors=True)
        print(f"creating the peers' environment in {env_dir} ({', '.join(PEERS)}) ...", flush=True)
        venv.create(env_dir, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS], check=True)
        (env_dir / "ready").write_text("")
    return python


# --- the run ---------------------------------------------------------------------------------


def run(
    rt: Runtime,
    sizes: Sequence[int],
    upsert_rows: int,
    runs: int,
    systems: Sequence[str],
    workdir: str | None,
    bucket_rows: int,
    paimon_max: int,
) -> dict[str, Any]:
    """Builds the workloads, runs every system on each size, prints the report."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="dynbucket-bench-"))
    python = peers_python() if {"delta", "paimon"} & set(systems) else None
    rows: list[Measurement] = []
    medians: dict[tuple[str, int], float] = {}
    try:
        for size in sizes:
            folder = base / f"workload-{size}-{upsert_rows}x{runs + 1}"
            print(
                f"workload: {size:,}-row table, {runs + 1} upserts of {upsert_rows:,} rows "
                f"(half updates), {PARTITIONS} partitions ...",
                flush=True,
            )
            workload(folder, size, upsert_rows, runs + 1)
            tables = base / f"tables-{size}"
            shutil.rmtree(tables, ignore_errors=True)
            tables.mkdir(parents=True)
            running: dict[str, Ours | InProcess | Floor | PlainSpark | Peer] = {}
            try:
                for system in systems:
                    if system == "paimon" and size > paimon_max:
                        print(f"  pypaimon skipped at {size:,} rows (--paimon-max {paimon_max:,})")
                        continue
                    print(f"loading {LABELS[system]} with {size:,} rows ...", flush=True)
                    sut = _system(system, rt, tables, bucket_rows, python, running)
                    sut.load(_files(folder, "load"))
                    running[system] = sut
                # The systems take turns on each upsert file: none profits from running after
                # the others warmed the machine (JIT, page cache). pypaimon goes after them:
                # its minute-long upserts would let Spark stop its idle Python workers (after
                # one minute), which a stream's micro-batches do not see.
                seconds: dict[str, list[float]] = {system: [] for system in running}
                turns = [s for s in running if s != "paimon"]
                for group in (turns, [s for s in running if s == "paimon"]):
                    for f in _files(folder, "upsert"):
                        for system in group:
                            seconds[system].append(running[system].upsert(f))
            finally:
                for sut in running.values():
                    sut.close()
            for system, secs in seconds.items():
                m = Measurement(
                    f"{LABELS[system]} @{_size_tag(size)}",
                    upsert_rows,
                    secs[1:],
                    {"system": system, "table_rows": size, "first_upsert_s": round(secs[0], 3)},
                )
                rows.append(m)
                medians[(system, size)] = m.median
            shutil.rmtree(tables, ignore_errors=True)
    finally:
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
    return print_report("upsert", "rows", rows, **_summary(medians, sizes))


def _system(
    system: str,
    rt: Runtime,
    tables: Path,
    bucket_rows: int,
    python: Path | None,
    running: dict[str, Any],
) -> Ours | InProcess | Floor | PlainSpark | Peer:
    if system == "inprocess":
        return InProcess(tables / "inprocess", bucket_rows)
    if system == "inprocess-v9":
        return InProcess(tables / "inprocess-v9", bucket_rows, version=9)
    if system == "inprocess-partial":
        return InProcess(tables / "inprocess-partial", bucket_rows, partial=True)
    if system == "floor":
        return Floor(tables / "floor", running.get("inprocess"))
    ours = running.get("dynbucket")
    if system == "dynbucket":
        return Ours(rt, tables / "dynbucket", bucket_rows)
    if system == "dynbucket-nometa":
        return Ours(rt, tables / "dynbucket-nometa", bucket_rows, meta=False)
    if system == "dynbucket-v9":
        return Ours(rt, tables / "dynbucket-v9", bucket_rows, version=9)
    if system == "dynbucket-two-stage":
        return Ours(rt, tables / "dynbucket-two-stage", bucket_rows, one_stage=False)
    if system == "spark":
        return PlainSpark(rt, tables / "spark", ours)
    if python is None:
        raise ValueError(f"system {system!r}: the peers' environment was not created")
    return Peer(python, system, tables / system, bucket_rows)


def _size_tag(rows: int) -> str:
    """5M, 50M; 200k for a table under a million rows (a quick run)."""
    return f"{rows // 1_000_000}M" if rows >= 1_000_000 else f"{rows // 1_000}k"


def _summary(medians: dict[tuple[str, int], float], sizes: Sequence[int]) -> dict[str, Any]:
    """Ratios of medians measured in this run (time of the other / time of ours)."""
    out: dict[str, Any] = {}
    for size in sizes:
        tag = _size_tag(size)
        if ("inprocess", size) in medians and ("floor", size) in medians:  # time / floor's
            out[f"inprocess_vs_floor_{tag}"] = round(
                medians[("inprocess", size)] / medians[("floor", size)], 3
            )
        if ("inprocess", size) in medians and ("inprocess-partial", size) in medians:
            out[f"partial_vs_whole_{tag}"] = round(  # partial upsert's time / whole rows'
                medians[("inprocess-partial", size)] / medians[("inprocess", size)], 3
            )
        for v9, v6 in (("dynbucket-v9", "dynbucket"), ("inprocess-v9", "inprocess")):
            if (v9, size) in medians and (v6, size) in medians:  # version 9's time / 6's
                out[f"{v9}_vs_v6_{tag}"] = round(medians[(v9, size)] / medians[(v6, size)], 3)
        ours_s = medians.get(("dynbucket", size))
        if ours_s is None:
            continue
        for system in ("paimon", "delta", "spark"):
            if (system, size) in medians:
                out[f"speedup_vs_{system}_{tag}"] = round(medians[(system, size)] / ours_s, 3)
        if ("dynbucket-two-stage", size) in medians:  # two stages' time / one's
            out[f"two_stage_vs_one_{tag}"] = round(
                medians[("dynbucket-two-stage", size)] / ours_s, 3
            )
        if ("dynbucket-nometa", size) in medians:  # time with meta fields / time without
            out[f"meta_fields_cost_{tag}"] = round(ours_s / medians[("dynbucket-nometa", size)], 3)

    if len(sizes) >= 2 and all(("dynbucket", s) in medians for s in (sizes[0], sizes[-1])):
        out["growth_small_to_large"] = round(
            medians[("dynbucket", sizes[-1])] / medians[("dynbucket", sizes[0])], 3
        )
    return out


if __name__ == "__main__":  # pragma: no cover - use `dynbucket bench upsert`
    sys.exit("run: dynbucket bench upsert")
