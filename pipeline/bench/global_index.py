"""``dynbucket bench global``: a global index's slot against the partition-scoped one.

One table of ``keys`` keys over ``partitions`` partitions is written in this process (two
slots' index sections, its index compacted), then, side by side in one run, for the
partition-scoped cache (every partition bootstrapped) and the global one, each in a fresh
Ray actor (the slot's own process):

1. **Bootstrap** of one slot holding every key (slot 0 of 1), and of slot 0 of 2 (a
   slot's share): seconds, index entries read.
2. **Whole process resident memory per key**, from ``/proc/self/status`` (VmRSS) after the
   bootstrap of slot 0 of 1, over the keys it caches.
3. **Lookups** of known keys (batches of 100k rows of mixed partitions, as a stream
   brings them) and **inserts** of new keys (plus their commit), per second.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dynbucket.base.options import DynamicBucketIndex
from dynbucket.bench.report import Measurement, print_report
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table

BATCH = 100_000
#: Rows of each write building the table.
WRITE_ROWS = 2_000_000


def _options(global_index: bool) -> DynamicBucketIndex:
    return DynamicBucketIndex(max_keys_per_bucket=2_000_000, global_index=global_index)


def build(keys: int, partitions: int, folder: str) -> Table:
    """The table: key ``i`` in partition ``i % partitions``, written by two slots."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("v", pa.int8())])
    table = Table.create(
        str(Path(folder) / "t"),
        schema,
        "id",
        "p",
        index=_options(True),
        options=TableOptions(
            compaction_async=False, clean_automatic=False, archive_automatic=False
        ),
    )
    start = time.perf_counter()
    for lo in range(0, keys, WRITE_ROWS):
        ids = np.arange(lo, min(keys, lo + WRITE_ROWS), dtype=np.int64)
        rows = pa.table(
            {"id": ids, "p": (ids % partitions).astype(np.int32), "v": np.zeros(len(ids), np.int8)}
        )
        table.upsert(rows, assigner_slots=2)
        print(
            f"  built {min(keys, lo + WRITE_ROWS):,} keys, {time.perf_counter() - start:.0f}s",
            flush=True,
        )
    table.compact_index(min_files=2)
    return table


class _Probe:
    """A slot process: one core over the table's index (Ray actor)."""

    def __init__(self, uri: str, global_index: bool, slot: int, slots: int) -> None:
        from dynbucket.actors import kernels

        kernels.warm_up()
        self.uri, self.global_index, self.slot, self.slots = uri, global_index, slot, slots

    def bootstrap(self) -> dict[str, Any]:
        import gc

        from dynbucket.actors.assigner import BucketAssigner
        from dynbucket.actors.global_assigner import GlobalBucketAssigner
        from dynbucket.format.table.context import TableRef
        from dynbucket.write.index_source import RLIIndexSource

        table = Table.open(self.uri)
        source = RLIIndexSource(TableRef.of(table.store, table.spec))
        before = _rss()
        start = time.perf_counter()
        kind = GlobalBucketAssigner if self.global_index else BucketAssigner
        core = kind(self.slot, self.slots, _options(self.global_index), source)
        core.begin(1, -1)
        if isinstance(core, GlobalBucketAssigner):
            core._ensure_loaded()
        else:
            for name in source.partitions():
                core._index(name)
        seconds = time.perf_counter() - start
        gc.collect()
        pa.default_memory_pool().release_unused()
        self.core = core
        stats = core.stats()
        return {
            "seconds": seconds,
            "keys": stats.cached_keys,
            "cache_bytes": stats.cached_bytes,
            "entries_read": stats.bootstrap_entries_scanned,
            "rss_before": before,
            "rss_after": _rss(),
        }

    def work(self, partitions: int, lookups: int, inserts: int) -> dict[str, float]:
        """Seconds of ``lookups`` known keys' and ``inserts`` new keys' assignment."""
        from dynbucket.base.keyhash import hash_columns

        core, rng = self.core, np.random.default_rng(7)
        names = [f"p={p}" for p in range(partitions)]

        def calls(ids: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
            hashes = np.asarray(hash_columns([pa.array(ids)]), np.int64)
            mine = (hashes % self.slots) == self.slot
            ids, hashes = ids[mine], hashes[mine]
            codes = (ids % partitions).astype(np.int64)
            return [
                (codes[i : i + BATCH], hashes[i : i + BATCH]) for i in range(0, len(ids), BATCH)
            ]

        known = calls(rng.integers(0, self.keys_total, lookups * self.slots))
        fresh = calls(np.arange(self.keys_total, self.keys_total + inserts * self.slots))
        start = time.perf_counter()
        for codes, hashes in known:
            core.assign(1, names, codes, hashes)
        looked = time.perf_counter() - start
        start = time.perf_counter()
        for codes, hashes in fresh:
            core.assign(1, names, codes, hashes)
        core.snapshot(1, 1)
        return {"lookups": looked, "inserts": time.perf_counter() - start}

    def set_total(self, keys: int) -> None:
        self.keys_total = keys


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def run(
    keys: int, partitions: int, runs: int, workdir: str | None, keep: str | None = None
) -> dict[str, Any]:
    """The bench; ``keep``: a folder where the table is built once and kept (a later run
    with the same folder, keys and partitions measures it again without building)."""
    import ray

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        folder = keep or tmp
        if not (Path(folder) / "t" / ".hoodie").exists():
            print(f"building {keys:,} keys over {partitions} partitions", flush=True)
            build(keys, partitions, folder)
        uri = str(Path(folder) / "t")
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
        try:
            return _measure(uri, keys, partitions, runs, ray)
        finally:
            ray.shutdown()


def _measure(uri: str, keys: int, partitions: int, runs: int, ray: Any) -> dict[str, Any]:
    probe = ray.remote(_Probe).options(num_cpus=1, max_concurrency=1)
    rows, figures = [], {}
    lookups = inserts = min(keys, 2_000_000)
    for label, global_index in (("partition-scoped", False), ("global", True)):
        boot = Measurement(f"{label}: bootstrap, 1 slot", keys)
        share = Measurement(f"{label}: bootstrap, slot 0 of 2", keys // 2)
        look = Measurement(f"{label}: lookups", lookups)
        ins = Measurement(f"{label}: inserts (+ commit)", inserts)
        per_key: list[float] = []
        for r in range(runs):
            actor = probe.remote(uri, global_index, 0, 1)
            out = ray.get(actor.bootstrap.remote())
            boot.seconds.append(out["seconds"])
            per_key.append(out["rss_after"] / out["keys"])
            boot.extra = {
                "rss_mib": round(out["rss_after"] / 2**20),
                "rss_before_mib": round(out["rss_before"] / 2**20),
                "cache_bytes_per_key": round(out["cache_bytes"] / out["keys"], 2),
                "entries_read": out["entries_read"],
            }
            ray.get(actor.set_total.remote(keys))
            spent = ray.get(actor.work.remote(partitions, lookups, inserts))
            look.seconds.append(spent["lookups"])
            ins.seconds.append(spent["inserts"])
            ray.kill(actor)
            half = probe.remote(uri, global_index, 0, 2)
            out = ray.get(half.bootstrap.remote())
            share.seconds.append(out["seconds"])
            share.extra = {"keys": out["keys"], "entries_read": out["entries_read"]}
            ray.kill(half)
            print(
                f"  {label} run {r + 1}/{runs}: bootstrap {boot.seconds[-1]:.2f}s (half "
                f"{share.seconds[-1]:.2f}s), RSS {per_key[-1]:.2f} B/key, lookups "
                f"{look.seconds[-1]:.2f}s, inserts {ins.seconds[-1]:.2f}s",
                flush=True,
            )
        boot.extra["rss_bytes_per_key"] = round(statistics.median(per_key), 2)
        figures[label] = (boot, look, ins)
        rows += [boot, share, look, ins]
    (pb, pl, pi), (gb, gl, gi) = figures["partition-scoped"], figures["global"]
    return print_report(
        "global",
        "keys",
        rows,
        keys=keys,
        partitions=partitions,
        global_rss_bytes_per_key=gb.extra["rss_bytes_per_key"],
        scoped_rss_bytes_per_key=pb.extra["rss_bytes_per_key"],
        global_bootstrap_s=round(gb.median, 2),
        scoped_bootstrap_s=round(pb.median, 2),
        lookups_scoped_vs_global=round(pl.per_second / gl.per_second, 2),
        inserts_scoped_vs_global=round(pi.per_second / gi.per_second, 2),
    )
