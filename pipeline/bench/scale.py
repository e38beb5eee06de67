"""``dynbucket bench scale``: what grows with the table, measured on this machine.

Two tables of two partitions each (a key's partition by its parity), written through the
Spark path with ``--slots`` slots in 5M-row commits: a small one (5M rows) and a large one
(``--rows``; 200M by default, 100M keys per partition). Then:

1. **Growth.** The same kind of upsert (1M rows: half updates of existing keys, half new
   keys) into each, the tables taking turns; upsert 0 is the first after ``Table.open``
   (the slots bootstrap then), upserts 1.. the steady state of a stream (their median is
   the figure). Goal: the large table's median <= 1.3x the small one's.
2. **Bootstrap into one slot.** A fleet of one slot over the large table's index; the
   first lookup in partition ``p0`` loads all of it. Timed from the driver (the call) and
   by the slot (its load). Goal: <= 15 s at 100M keys.
3. **Memory per key.** The slot's process, from ``/proc/<pid>/status`` (VmRSS), before
   and after that load, over the keys it then holds. Goal: <= 16 B at 100M keys.
4. **Each slot its own slice.** A fleet of ``--slots`` slots loads the partition: index
   entries each slot read from storage, against the entries the partition holds.

Every bootstrap is a fresh fleet (fresh processes), run ``--runs`` times; medians.
"""

from __future__ import annotations

import functools
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base.keyhash import hash_columns, slot_of
from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.format.table.context import TableRef
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.results import WriteResult

SMALL = 5_000_000
CHUNK = 5_000_000
PARTITION = "part=p0"


def records(ids: np.ndarray, ts: int) -> pa.Table:
    """Rows of keys ``ids``: even keys in partition p0, odd ones in p1."""
    ids_a = pa.array(ids, pa.int64())
    return pa.table(
        {
            "key": pc.binary_join_element_wise("key-", pc.cast(ids_a, pa.string()), ""),
            "part": pa.array(np.where(ids % 2 == 0, "p0", "p1").astype(object), pa.string()),
            "v": pc.add(ids_a, ts),
            "ts": pa.array(np.full(len(ids), ts, np.int64)),
        }
    )


def workload(folder: Path, size: int, upsert_rows: int, upserts: int, seed: int = 3) -> None:
    """Load files (``load-*``) and upsert files (``upsert-*``): half updates, half new keys."""
    if (folder / "done").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, size, CHUNK)):
        ids = np.arange(start, min(size, start + CHUNK))
        pq.write_table(records(ids, 0), folder / f"load-{i:04d}.parquet")
    rng = np.random.default_rng(seed)
    for r in range(upserts):
        old = np.unique(rng.choice(size, upsert_rows // 2, replace=False))
        new = np.arange(size + r * upsert_rows, size + r * upsert_rows + upsert_rows - len(old))
        ids = rng.permutation(np.concatenate([old, new]))
        pq.write_table(records(ids, r + 1), folder / f"upsert-{r}.parquet")
    (folder / "done").write_text("")


def _load(rt: Runtime, where: Path, folder: Path, slots: int, bucket_rows: int) -> float:
    files = sorted(folder.glob("load-*.parquet"))
    index = DynamicBucketIndex(max_keys_per_bucket=bucket_rows, assigner_slots=slots)
    start = time.perf_counter()
    with Table.create(
        str(where), pq.read_schema(files[0]), "key", "part", "ts", index, runtime=rt
    ) as table:
        for i, f in enumerate(files):
            table.upsert(rt.spark.read.parquet(str(f)))
            if i % 4 == 3:
                print(f"    {(i + 1) * CHUNK:,} rows loaded", flush=True)
    return time.perf_counter() - start


def _rss(pid: int) -> int:
    """Resident bytes of process ``pid`` (this machine's ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _pids(names: list[str]) -> list[int]:
    """Process ids of the named live actors, in the order given."""
    from ray._private import state

    alive = {a.get("Name", ""): a["Pid"] for a in state.actors().values() if a["State"] == "ALIVE"}
    return [alive[n] for n in names]


def bootstrap(rt: Runtime, table: Table, slots: int, probe: pa.Table, label: str) -> dict[str, Any]:
    """A fresh fleet of ``slots`` over ``table``'s index; each slot looks up one key of the
    partition (which loads its slice of the partition). Times, bytes, entries read."""
    link = RayLink(rt.ray_address, rt.config.namespace)
    source = functools.partial(RLIIndexSource, TableRef.of(table.store, table.spec))
    fleet = AssignerFleet(link, label, slots, table.spec.dynamic_options, source)
    try:
        pids = _pids(fleet.names)
        before = [_rss(p) for p in pids]
        latest = int(table.latest_instant() or -1)
        fleet.begin(latest + 1, latest)
        hashes = probe.column("_hash").to_numpy()
        calls = []
        for slot in range(slots):  # one key of each slot
            mine = probe.filter(pa.array(slot_of(hashes, slots) == slot)).slice(0, 1)
            calls.append((slot, mine))
        import ray

        seconds, _ = timed(
            lambda: ray.get(
                [fleet.handles[s].assign.remote(latest + 1, batch) for s, batch in calls]
            )
        )
        time.sleep(1.0)  # the allocator's freed pages go back to the system
        after = [_rss(p) for p in pids]
        stats = fleet.stats()
        fleet.abort(latest + 1)
        return {
            "seconds": seconds,
            "slot_seconds": [s["bootstrap_seconds"] for s in stats],
            "keys": [s["cached_keys"] for s in stats],
            "cache_bytes": [s["cached_bytes"] for s in stats],
            "entries_read": [s["bootstrap_entries_scanned"] for s in stats],
            "rss_before": before,
            "rss_after": after,
        }
    finally:
        fleet.close()


def _probe() -> pa.Table:
    """Some keys of partition p0, with their hash (as stage A sends them)."""
    keys = pa.array([f"key-{i}" for i in range(0, 8000, 2)])  # in p0
    return pa.table(
        {"_partition": pa.array([PARTITION] * len(keys)), "_hash": pa.array(hash_columns([keys]))}
    )


def run(
    rt: Runtime,
    rows: int,
    upsert_rows: int,
    runs: int,
    slots: int,
    bucket_rows: int,
    workdir: str | None,
) -> dict[str, Any]:
    """Builds both tables, measures growth, bootstrap, memory and slices; prints the report."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="dynbucket-scale-"))
    measured: list[Measurement] = []
    summary: dict[str, Any] = {"large_rows": rows, "slots": slots}
    try:
        tables: dict[int, Table] = {}
        for size in (SMALL, rows):
            folder = base / f"workload-{size}-{upsert_rows}x{runs + 1}"
            print(
                f"workload: {size:,} rows in two partitions, {runs + 1} upserts of "
                f"{upsert_rows:,} rows (half updates) ...",
                flush=True,
            )
            workload(folder, size, upsert_rows, runs + 1)
            where = base / f"table-{size}"
            shutil.rmtree(where, ignore_errors=True)
            print(f"loading {size:,} rows ({slots} slots) ...", flush=True)
            summary[f"load_seconds_{size}"] = round(_load(rt, where, folder, slots, bucket_rows), 1)
            tables[size] = Table.open(str(where), runtime=rt)  # cold caches, as a new driver
        # 1. Growth: the tables take turns on each upsert.
        seconds: dict[int, list[float]] = {SMALL: [], rows: []}
        for r in range(runs + 1):
            for size, table in tables.items():
                f = base / f"workload-{size}-{upsert_rows}x{runs + 1}" / f"upsert-{r}.parquet"
                s, result = timed(functools.partial(_upsert_file, rt, table, f))
                print(
                    f"  upsert {r} into {size:,}: {s:.2f}s ({result.keys_updated:,} updated,"
                    f" {result.keys_inserted:,} inserted)",
                    flush=True,
                )
                seconds[size].append(s)
        for size, secs in seconds.items():
            measured.append(
                Measurement(
                    f"1M upsert into {size // 1_000_000}M",
                    upsert_rows,
                    secs[1:],
                    {"first_upsert_s": round(secs[0], 3)},
                )
            )
        summary["growth"] = round(
            statistics.median(seconds[rows][1:]) / statistics.median(seconds[SMALL][1:]), 3
        )
        large = tables[rows]
        for table in tables.values():
            table.close()  # their fleets go: only the measured fleet holds keys now
        probe = _probe()
        # 2-3. Into one slot.
        ones = [bootstrap(rt, large, 1, probe, f"scale-one-{i}") for i in range(runs)]
        for o in ones:
            print(
                f"  one slot: {o['seconds']:.2f}s (slot's load {o['slot_seconds'][0]:.2f}s), "
                f"{o['keys'][0]:,} keys, RSS {o['rss_before'][0] / 2**20:.0f} -> "
                f"{o['rss_after'][0] / 2**20:.0f} MiB",
                flush=True,
            )
        measured.append(
            Measurement("bootstrap into one slot", ones[0]["keys"][0], [o["seconds"] for o in ones])
        )
        keys = ones[0]["keys"][0]
        summary["bootstrap_keys"] = keys
        summary["bootstrap_s"] = round(statistics.median(o["seconds"] for o in ones), 2)
        summary["rss_per_key_total_b"] = round(
            statistics.median(o["rss_after"][0] / keys for o in ones), 2
        )
        summary["rss_per_key_added_b"] = round(
            statistics.median((o["rss_after"][0] - o["rss_before"][0]) / keys for o in ones), 2
        )
        summary["cache_bytes_per_key"] = round(ones[0]["cache_bytes"][0] / keys, 2)
        # 4. Each slot its slice.
        spread = [bootstrap(rt, large, slots, probe, f"scale-slots-{i}") for i in range(runs)]
        read = spread[0]["entries_read"]
        summary["entries_read_per_slot"] = read
        summary["entries_in_partition"] = keys  # p0's, as the one slot held them all
        summary["read_share_max"] = round(max(read) / keys, 4)
        summary[f"bootstrap_{slots}_slots_s"] = round(
            statistics.median(o["seconds"] for o in spread), 2
        )
        for o in spread:
            print(
                f"  {slots} slots: {o['seconds']:.2f}s, entries read per slot "
                f"{o['entries_read']} of {keys:,}",
                flush=True,
            )
    finally:
        if not workdir:
            shutil.rmtree(base, ignore_errors=True)
    return print_report("scale", "rows", measured, **summary)


def _upsert_file(rt: Runtime, table: Table, path: Path) -> WriteResult:
    return table.upsert(rt.spark.read.parquet(str(path)))
