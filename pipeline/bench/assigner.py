"""``dynbucket bench assigner``: the assigner core on one partition of ``keys`` keys.

In one run, side by side:

* core lookups of known keys, core inserts of new keys (including the merge of the
  checkpoint's mappings into the sorted run at commit), bytes per cached key;
* the same lookups and inserts with a Python ``dict`` (the baseline the compact map replaces);
* bootstrap of the partition's cache from a real table's record-level index;
* the same from a version 9 table's metadata table (Hudi's partitioned record index, read
  whole by every slot) against dynbucket's index of that table (the slot's section), side
  by side, for 1 and 4 slots (up to ``METADATA_KEYS`` keys: the table is built in process);
* an update-only stream (10 micro-batches of 10k known keys) over that index, by the
  proposal's eviction flags alone and with ``dynamic-bucket.cache.max-bytes``: bootstraps
  counted and timed;
* the actor: Arrow in and out, one call per 100k rows (needs Ray; ``--no-actor`` skips it).

The core runs in this one process (one CPU core); Ray is started only for the actor case.
"""

from __future__ import annotations

import functools
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dynbucket.actors import BucketAssigner, DynamicBucketIndex, PartitionLoad
from dynbucket.actors.assigner import EmptySource
from dynbucket.actors.cache import SortedRun, to_cache_keys
from dynbucket.base.keyhash import hash_columns
from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.format.table.context import TableRef
from dynbucket.options import TableOptions
from dynbucket.table import Table
from dynbucket.write.index_source import MetadataIndexSource, RLIIndexSource

BATCH = 100_000
OPTIONS = DynamicBucketIndex(max_keys_per_bucket=2_000_000)


class _Preloaded(EmptySource):
    """An IndexSource holding one partition's committed keys in memory."""

    def __init__(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        order = np.argsort(hashes)
        self.keys = to_cache_keys(hashes[order])
        self.buckets = buckets[order].astype(np.uint16)

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        counts = np.bincount(self.buckets).astype(np.int64)
        return {p: PartitionLoad(self.keys, self.buckets, counts) for p in partitions}

    def bucket_bytes(self, partition: str) -> np.ndarray:
        return np.zeros(0, np.int64)

    def partitions(self) -> list[str]:
        return ["p"]


def _committed(keys: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    hashes = np.unique(rng.integers(-(2**63), 2**63 - 1, keys + keys // 50, dtype=np.int64))[:keys]
    rng.shuffle(hashes)
    per_bucket = OPTIONS.max_keys_per_bucket or 1
    return hashes, (np.arange(keys) // per_bucket).astype(np.int64)


def _batches(values: np.ndarray) -> list[np.ndarray]:
    return [values[i : i + BATCH] for i in range(0, len(values), BATCH)]


def _core_lookups(core: BucketAssigner, batches: list[np.ndarray]) -> None:
    zeros = np.zeros(BATCH, np.int32)
    for b in batches:
        core.assign(1, ["p"], zeros[: len(b)], b)


def _core_inserts(core: BucketAssigner, batches: list[np.ndarray]) -> None:
    _core_lookups(core, batches)  # unknown keys: each call allocates and records them
    core.snapshot(1, 1)  # commit: the checkpoint's mappings merge into the sorted run


def _dict_lookups(d: dict[int, int], batches: list[list[int]]) -> None:
    for b in batches:
        [d.get(h, -1) for h in b]


def _dict_inserts(d: dict[int, int], batches: list[list[int]]) -> None:
    for b in batches:
        for h in b:
            if h not in d:
                d[h] = 0


def core_cases(keys: int, lookups: int, inserts: int, runs: int) -> list[Measurement]:
    hashes, buckets = _committed(keys)
    rng = np.random.default_rng(11)
    known = _batches(hashes[rng.integers(0, keys, lookups)])
    fresh_all = np.setdiff1d(rng.integers(-(2**63), 2**63 - 1, inserts * 2, dtype=np.int64), hashes)
    fresh = _batches(rng.permutation(fresh_all)[:inserts])
    source = _Preloaded(hashes, buckets)
    look = Measurement("core lookups (known keys)", lookups)
    ins = Measurement("core inserts (new keys, + commit)", inserts)
    dict_look = Measurement("dict lookups (known keys)", lookups)
    dict_ins = Measurement("dict inserts (new keys)", inserts)
    bytes_core = bytes_dict = 0.0
    for r in range(runs):
        core = BucketAssigner(0, 1, OPTIONS, source)
        core.begin(1, -1)
        _core_lookups(core, [hashes[:1]])  # bootstrap outside the timings
        look.seconds.append(timed(functools.partial(_core_lookups, core, known))[0])
        ins.seconds.append(timed(functools.partial(_core_inserts, core, fresh))[0])
        bytes_core = core.partitions["p"].nbytes / len(core.partitions["p"])

        d = dict(zip(hashes.tolist(), buckets.tolist(), strict=True))
        dict_look.seconds.append(
            timed(functools.partial(_dict_lookups, d, [b.tolist() for b in known]))[0]
        )
        dict_ins.seconds.append(
            timed(functools.partial(_dict_inserts, d, [b.tolist() for b in fresh]))[0]
        )
        bytes_dict = _dict_bytes(d) / len(d)
        print(
            f"  run {r + 1}/{runs}: core lookup {look.seconds[-1]:.2f}s insert "
            f"{ins.seconds[-1]:.2f}s | dict lookup {dict_look.seconds[-1]:.2f}s insert "
            f"{dict_ins.seconds[-1]:.2f}s",
            flush=True,
        )
    look.extra["bytes_per_key"] = round(bytes_core, 2)
    ins.extra["bytes_per_key"] = round(bytes_core, 2)
    dict_look.extra["bytes_per_key"] = round(bytes_dict, 1)
    return [look, ins, dict_look, dict_ins]


def _dict_bytes(d: dict[int, int]) -> int:
    # The table itself plus one int object per key (bucket ints are small and shared).
    return sys.getsizeof(d) + sum(sys.getsizeof(k) for k in list(d)[:10_000]) * len(d) // 10_000


def _indexed_table(keys: int, folder: str) -> Table:
    """A table of one partition of ``keys`` keys, its record-level index compacted."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.int8())])
    table = Table.create(str(Path(folder) / "t"), schema, "id", index=OPTIONS)
    for lo in range(0, keys, 2_000_000):
        ids = np.arange(lo, min(keys, lo + 2_000_000))
        table.upsert(pa.table({"id": ids, "v": np.zeros(len(ids), np.int8)}))
    table.compact_index(min_files=2)
    return table


def bootstrap_case(table: Table, keys: int, runs: int) -> Measurement:
    """Bootstrap of one slot's cache from a real table's index partition (one base file)."""
    m = Measurement("bootstrap from the RLI", keys)
    source = RLIIndexSource(TableRef.of(table.store, table.spec))
    for _ in range(runs):
        s, load = timed(functools.partial(source.load, "", 0, 1))
        m.seconds.append(s)
        assert len(load.keys) == keys
        run = SortedRun(load.keys, load.buckets)
        m.extra["bytes_per_key"] = round(run.nbytes / len(run), 2)
    return m


#: Keys of the version 9 table of the metadata table's bootstrap cases.
METADATA_KEYS = 1_000_000


def metadata_bootstrap_cases(keys: int, runs: int, folder: str) -> list[Measurement]:
    """One slot's bootstrap from a version 9 table's partitioned record index
    (``MetadataIndexSource``) and from dynbucket's index of the same table
    (``RLIIndexSource``), interleaved, with 1 and 4 slots."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int8())])
    table = Table.create(
        str(Path(folder) / "v9"),
        schema,
        "id",
        "p",
        index=OPTIONS,
        options=TableOptions(table_version=9),
    )
    for lo in range(0, keys, 500_000):
        ids = np.arange(lo, min(keys, lo + 500_000))
        n = len(ids)
        table.upsert(pa.table({"id": ids, "p": ["a"] * n, "v": np.zeros(n, np.int8)}))
    ref = TableRef.of(table.store, table.spec)
    # A fresh source each run: a source that found the two indexes agreeing answers its
    # next loads from dynbucket's index (``MetadataIndexSource``), which a kept source
    # would time from the second run on (its median then read 1.01x dynbucket's own).
    sources = {"metadata table": MetadataIndexSource, "dynbucket index": RLIIndexSource}
    out: list[Measurement] = []
    for slots in (1, 4):
        cases = {
            name: Measurement(f"v9 bootstrap, {slots} slot(s), from the {name}", keys // slots)
            for name in sources
        }
        for _ in range(runs):
            for name, kind in sources.items():
                source = kind(ref)
                s, load = timed(functools.partial(source.load, "p=a", 0, slots))
                cases[name].seconds.append(s)
                cases[name].extra["keys_loaded"] = len(load.keys)
        out += cases.values()
    table.close()
    return out


def update_stream_cases(table: Table, keys: int, runs: int) -> list[Measurement]:
    """A CDC stream: 10 micro-batches of 10k updates of known keys (no new key) through the
    core over the real index, by the proposal's flags alone and with a cache budget: the
    whole stream's seconds, and the bootstraps it paid."""
    rng = np.random.default_rng(3)
    ids = pa.array(rng.integers(0, keys, (10, 10_000)).ravel())
    hashes = np.asarray(hash_columns([ids]), np.int64).reshape(10, 10_000)
    out = []
    for label, budget in (("flags alone", None), ("1 GiB budget", 1 << 30)):
        options = DynamicBucketIndex(max_keys_per_bucket=2_000_000, cache_max_bytes=budget)
        m = Measurement(f"update-only stream, {label}", hashes.size)
        for _ in range(runs):
            core = BucketAssigner(
                0, 1, options, RLIIndexSource(TableRef.of(table.store, table.spec))
            )
            start = time.perf_counter()
            for checkpoint, batch in enumerate(hashes, start=1):
                core.begin(checkpoint, checkpoint - 1)
                _, is_new = core.assign(checkpoint, [""], np.zeros(len(batch), np.int32), batch)
                assert not is_new.any()
                core.snapshot(checkpoint, checkpoint)
            m.seconds.append(time.perf_counter() - start)
            stats = core.stats()
            m.extra.update(
                bootstraps=stats.bootstraps, bootstrap_s=round(stats.bootstrap_seconds, 3)
            )
        out.append(m)
    return out


def actor_case(keys: int, calls: int, runs: int) -> Measurement:
    """Arrow in and out through a real actor: (partition, hash) -> (+bucket, +is_new)."""
    import ray

    from dynbucket.actors.actor import assigner_actor_class

    hashes, buckets = _committed(keys)
    rng = np.random.default_rng(5)
    batches = [
        pa.RecordBatch.from_arrays(
            [
                pa.array(["p"] * BATCH).dictionary_encode(),
                pa.array(hashes[rng.integers(0, keys, BATCH)]),
            ],
            names=["_partition", "_hash"],
        )
        for _ in range(calls)
    ]
    m = Measurement("actor round trip (known keys)", calls * BATCH)
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    try:
        source = _Preloaded(hashes, buckets)
        for _ in range(runs):
            actor = assigner_actor_class(num_cpus=0).remote(0, 1, OPTIONS, lambda: source)
            ray.get(actor.begin.remote(1, -1))
            ray.get(actor.assign.remote(1, batches[0]))  # bootstrap outside the timing
            start = time.perf_counter()
            for b in batches:
                ray.get(actor.assign.remote(1, b))
            m.seconds.append(time.perf_counter() - start)
            ray.kill(actor)
    finally:
        ray.shutdown()
    return m


def run(keys: int, runs: int, actor: bool, workdir: str | None) -> dict[str, Any]:
    lookups = inserts = min(keys, 2_000_000)
    rows = core_cases(keys, lookups, inserts, runs)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        table = _indexed_table(keys, tmp)
        rows.append(bootstrap_case(table, keys, runs))
        flags, budget = update_stream_cases(table, keys, runs)
        rows += [flags, budget]
        metadata = metadata_bootstrap_cases(min(keys, METADATA_KEYS), runs, tmp)
        rows += metadata
    if actor:
        rows.append(actor_case(keys, 30, runs))
    core_look, core_ins, dict_look, dict_ins = rows[:4]
    return print_report(
        "assigner",
        "keys",
        rows,
        partition_keys=keys,
        core_vs_dict_lookup=round(core_look.per_second / dict_look.per_second, 2),
        core_vs_dict_insert=round(core_ins.per_second / dict_ins.per_second, 2),
        update_stream_flags_vs_budget=round(flags.median / budget.median, 2),
        v9_bootstrap_metadata_vs_own={
            f"{slots} slot(s)": round(metadata[2 * i].median / metadata[2 * i + 1].median, 2)
            for i, slots in enumerate((1, 4))
        },
        update_stream_bootstraps={
            "flags alone": flags.extra["bootstraps"],
            "budget": budget.extra["bootstraps"],
        },
    )
