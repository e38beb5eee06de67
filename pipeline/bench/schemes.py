"""``dynbucket bench schemes``: every bucket scheme on one growing, skewed workload.

The workload (deterministic, generated as Parquet files before anything is timed): 20
upserts into 8 partitions whose shares of the keys run from 100 to 1 (the largest holds 100
times the keys of the smallest); the first inserts ``base_rows`` keys, each later one 30%
updates (of earlier keys, skewed to the oldest: hot keys) and 70% new keys, so that the table
ends 10 times larger. Every scheme gets the same capacity (``capacity`` keys per bucket)
and starts with the same 4 buckets per partition where it has a choice:

* ``dynamic``: ``DynamicBucketIndex(max_keys_per_bucket=capacity, assigner_slots=4)``:
  buckets open by themselves;
* ``simple``: ``SimpleBucketIndex(num_buckets=4)``, rescaled by 2 (``rescale(2, [p])``)
  after an upsert leaves a partition with more than ``capacity`` keys per bucket on average;
* ``simple-partition``: the same with ``partition_buckets`` sized for each partition's
  final share (a user who knows the skew up front), rescaled by the same rule;
* ``consistent``: ``ConsistentHashingIndex(initial_buckets=4, max=capacity,
  min=capacity/5)``, rebalanced after every 5th upsert (it reads every key to decide).

Every table is merge-on-read and compacted after every 5th upsert (Hudi's default for
inline compaction), the same for all: without it, the stateless schemes' writes, which read
the keys of the groups they touch to tell inserts from updates, would read ever more log
files. The schemes take turns on each upsert file (so none runs on a machine another warmed
up). Timed apart: each upsert (``Table.upsert(spark.read.parquet(file))``), each growth
step, each compaction.
Measured at the end: buckets per partition, keys per bucket (max/median, coefficient of
variation), small files (buckets under 10% of capacity), bytes growth rewrote as a share of
the final table, and a point lookup (median of 30 single keys, ``Table.lookup``, each key in every
table in turn).

Then a churn phase (``churn``): a delete of ``CHURN_DELETES`` of the keys (every
partition alike), then an upsert bringing back ``CHURN_RETURNS`` of the deleted keys with
as many new keys as ``CHURN_NEW`` of them (growth rule applied after it). Measured after
it, from the rows the table holds: live keys per bucket (max/median, CV), buckets beyond
what the live keys need (per partition, ``buckets - ceil(live / capacity)``, summed), the
buckets the churn opened and how many of those the live keys do not need (beyond both the
buckets before it and ``ceil(live / capacity)``), and whether hudi-rs reads one row per
key, the keys the model says.
"""

from __future__ import annotations

import functools
import math
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.options import (
    ConsistentHashingIndex,
    DynamicBucketIndex,
    SimpleBucketIndex,
    TableOptions,
)
from dynbucket.runtime import Runtime
from dynbucket.table import Table

SCHEMES = ("dynamic", "simple", "simple-partition", "consistent")
#: Shares of the 8 partitions' keys: the largest 100 times the smallest.
WEIGHTS = (100, 40, 15, 6, 3, 2, 1, 1)
UPSERTS = 20
GROWTH = 10
UPDATES = 0.3
INITIAL = 4
REBALANCE_EVERY = 5
COMPACT_EVERY = 5
#: The churn phase: share of the keys deleted; of those, the share that comes back; new
#: keys of the churn upsert, as a share of the deleted keys.
CHURN_DELETES = 0.3
CHURN_RETURNS = 0.3
CHURN_NEW = 0.2
SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("part", pa.string()),
        ("v", pa.int64()),
        ("ts", pa.int64()),
        ("note", pa.string()),
    ]
)


# --- the workload ----------------------------------------------------------------------------


def partition_of(ids: np.ndarray) -> np.ndarray:
    """A key's partition, by the weights (a function of the key alone)."""
    cuts = np.cumsum(WEIGHTS) / sum(WEIGHTS)
    u = ((ids.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(1 << 32)) / float(1 << 32)
    return np.searchsorted(cuts, u, side="right")


def batches(base_rows: int, seed: int = 7) -> list[np.ndarray]:
    """The key ids of each upsert: the first ``base_rows`` new keys; then per upsert 70% new
    keys and 30% updates of earlier keys (skewed to the oldest), the table ending
    ``GROWTH`` times ``base_rows``."""
    rng = np.random.default_rng(seed)
    new_per = math.ceil(base_rows * (GROWTH - 1) / (UPSERTS - 1))
    updates_per = round(new_per * UPDATES / (1 - UPDATES))
    out, known = [np.arange(base_rows, dtype=np.int64)], base_rows
    for _ in range(UPSERTS - 1):
        drawn = (known * rng.random(updates_per * 4) ** 3).astype(np.int64)
        _, first = np.unique(drawn, return_index=True)  # distinct hot keys, as drawn
        hot = drawn[np.sort(first)][:updates_per]
        fresh = np.arange(known, known + new_per, dtype=np.int64)
        out.append(np.concatenate([hot, fresh]))
        known += new_per
    return out


def records(ids: np.ndarray, ts: int) -> pa.Table:
    parts = partition_of(ids)
    return pa.table(
        {
            "key": pa.array([f"key-{i:010d}" for i in ids.tolist()]),
            "part": pa.array([f"p{p}" for p in parts.tolist()]),
            "v": pa.array(ids * 3 + ts),
            "ts": pa.array(np.full(len(ids), ts, np.int64)),
            "note": pa.array([f"n{ts}"] * len(ids)),
        },
        schema=SCHEMA,
    )


def workload(folder: Path, base_rows: int) -> list[tuple[Path, np.ndarray]]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, ids in enumerate(batches(base_rows)):
        path = folder / f"upsert-{i:02d}.parquet"
        if not path.exists():
            pq.write_table(records(ids, i), path)
        out.append((path, ids))
    return out


def churn(known: np.ndarray, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """The churn phase's keys: ``(deleted, upserted)``: ``CHURN_DELETES`` of ``known``
    (distinct key ids, drawn evenly), then ``CHURN_RETURNS`` of those back and new keys
    after the largest known id, ``CHURN_NEW`` as many as were deleted."""
    rng = np.random.default_rng(seed)
    deleted = np.sort(rng.choice(known, round(len(known) * CHURN_DELETES), replace=False))
    back = np.sort(rng.choice(deleted, round(len(deleted) * CHURN_RETURNS), replace=False))
    start = int(known.max()) + 1
    fresh = np.arange(start, start + round(len(deleted) * CHURN_NEW), dtype=np.int64)
    return deleted, np.concatenate([back, fresh])


def live_layout(t: Table) -> dict[str, dict[int, int]]:
    """Live keys per bucket per partition, from the rows the table holds."""
    rows = t.to_arrow(columns=["key"], meta_columns=True).select(["_partition", "_bucket"])
    counts = rows.group_by(["_partition", "_bucket"]).aggregate([([], "count_all")])
    out: dict[str, dict[int, int]] = {}
    for r in counts.to_pylist():
        out.setdefault(r["_partition"], {})[r["_bucket"]] = r["count_all"]
    return out


def beyond_need(buckets: dict[str, int], live: dict[str, int], capacity: int) -> int:
    """Buckets beyond what the live keys need: per partition, buckets holding files minus
    ``ceil(live / capacity)`` (at least one for a partition that has files)."""
    return sum(max(0, n - max(1, math.ceil(live.get(p, 0) / capacity))) for p, n in buckets.items())


def opened_beyond_need(
    before: dict[str, int], after: dict[str, int], live: dict[str, int], capacity: int
) -> int:
    """Buckets the churn opened that its live keys do not need: per partition, buckets
    after it beyond both those before it (keys never move, so a bucket stays) and
    ``ceil(live / capacity)``."""
    return sum(
        max(0, n - max(before.get(p, 0), math.ceil(live.get(p, 0) / capacity)))
        for p, n in after.items()
    )


# --- the figures -----------------------------------------------------------------------------


def skew(keys: Sequence[int]) -> tuple[float, float]:
    """(max / median, coefficient of variation) of keys per bucket."""
    values = [k for k in keys if k > 0] or [0]
    median = statistics.median(values)
    mean = statistics.fmean(values)
    cv = statistics.pstdev(values) / mean if mean else 0.0
    return (max(values) / median if median else 0.0), cv


def small_files(keys: Sequence[int], capacity: int) -> int:
    """Buckets holding fewer than 10% of a bucket's capacity."""
    return sum(1 for k in keys if k < capacity / 10)


@dataclass
class Run:
    """One scheme's table and what it did."""

    scheme: str
    table: Table
    capacity: int
    upserts: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    growth_s: list[float] = field(default_factory=list)
    growth_bytes: int = 0
    compact_s: list[float] = field(default_factory=list)
    keys_per_partition: dict[str, int] = field(default_factory=dict)
    churn_s: dict[str, float] = field(default_factory=dict)

    def grow(self, step: int) -> None:
        """The scheme's growth rule after upsert ``step`` (module doc)."""
        t = self.table
        if self.scheme in ("simple", "simple-partition"):
            layouts = t.snapshot().layouts()
            full = [
                p
                for p, n in self.keys_per_partition.items()
                if n > self.capacity * layouts.num_buckets(p)
            ]
            if full:
                self._timed_growth(lambda: t.rescale(2, partitions=full))
        elif self.scheme == "consistent" and (step + 1) % REBALANCE_EVERY == 0:
            self._timed_growth(t.rebalance)

    def _timed_growth(self, fn: Any) -> None:
        seconds, done = timed(fn)
        self.growth_s.append(seconds)
        self.growth_bytes += done.bytes_written


def make_table(scheme: str, path: Path, rt: Runtime, capacity: int, base_rows: int) -> Table:
    if scheme == "dynamic":
        index: Any = DynamicBucketIndex(max_keys_per_bucket=capacity, assigner_slots=INITIAL)
    elif scheme == "simple":
        index = SimpleBucketIndex(num_buckets=INITIAL)
    elif scheme == "simple-partition":
        final = base_rows * GROWTH
        index = SimpleBucketIndex(
            num_buckets=INITIAL,
            partition_buckets={
                f"part=p{i}": max(1, math.ceil(final * w / sum(WEIGHTS) / capacity))
                for i, w in enumerate(WEIGHTS)
            },
        )
    else:
        index = ConsistentHashingIndex(
            initial_buckets=INITIAL, max_keys_per_bucket=capacity, min_keys_per_bucket=capacity // 5
        )
    return Table.create(
        str(path),
        SCHEMA,
        "key",
        "part",
        "ts",
        index,
        TableOptions(table_type="MERGE_ON_READ"),
        runtime=rt,
    )


def run(
    rt: Runtime,
    base_rows: int,
    capacity: int,
    schemes: Sequence[str],
    workdir: str | None,
    png: str | None,
) -> dict[str, Any]:
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-bench-engines-"))
    files = workload(root / "input", base_rows)
    runs = [
        Run(s, make_table(s, root / "tables" / s, rt, capacity, base_rows), capacity)
        for s in schemes
    ]
    seen: set[int] = set()
    try:
        for step, (path, ids) in enumerate(files):
            seen.update(ids.tolist())
            per_part = np.bincount(
                partition_of(np.fromiter(seen, np.int64)), minlength=len(WEIGHTS)
            )
            order = runs[step % len(runs) :] + runs[: step % len(runs)]
            for r in order:
                df = rt.spark.read.parquet(str(path))
                seconds, _ = timed(functools.partial(r.table.upsert, df))
                r.upserts.append(seconds)
                r.rows.append(len(ids))
                r.keys_per_partition = {f"part=p{i}": int(n) for i, n in enumerate(per_part)}
                r.grow(step)
                if (step + 1) % COMPACT_EVERY == 0:
                    r.compact_s.append(timed(r.table.compact)[0])
            print(
                f"upsert {step + 1}/{len(files)}: "
                + "  ".join(f"{r.scheme} {r.upserts[-1]:.2f}s" for r in runs),
                flush=True,
            )
        # Measured on quiet tables: a scheme's lookups timed while another table's
        # compaction still ran beside its writes paid for it (the first scheme: 19.6 ms
        # alone against 13.4 ms with its table the only one).
        for r in runs:
            r.table.wait_for_services()
        report = _report(runs, files, capacity, png or str(root / "engines.png"))
        report["churn"] = _churn(rt, runs, root, seen, capacity)
        return report
    finally:
        for r in runs:
            r.table.close()


def _report(
    runs: list[Run], files: list[tuple[Path, np.ndarray]], capacity: int, png: str
) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    final_ids = np.unique(np.concatenate([ids for _, ids in files]))
    probe = rng.choice(final_ids, 30, replace=False)
    probe_rows = records(probe, 0).select(["key", "part"])
    # Side by side: each probe key looked up in every table in turn (a scheme measured first,
    # or while the machine was busier, would pay for it alone).
    lookups: dict[str, list[float]] = {r.scheme: [] for r in runs}
    for i in range(len(probe)):
        for r in runs:
            lookups[r.scheme].append(
                timed(functools.partial(r.table.lookup, probe_rows.slice(i, 1)))[0]
            )
    rows, layouts = [], {}
    for r in runs:
        stats = r.table.stats()
        layouts[r.scheme] = stats
        keys = stats.column("keys").to_pylist()
        table_bytes = sum(stats.column("bytes").to_pylist())
        buckets = {}
        for p in sorted(set(stats.column("partition").to_pylist())):
            buckets[p] = sum(1 for q in stats.column("partition").to_pylist() if q == p)
        ratio, cv = skew(keys)
        per_s = [n / s for n, s in zip(r.rows, r.upserts, strict=True)]
        m = Measurement(
            r.scheme,
            int(statistics.median(r.rows)),
            r.upserts,
            {
                "rows_per_s_median": round(statistics.median(per_s)),
                "buckets": len(keys),
                "buckets_per_partition": buckets,
                "keys_max_over_median": round(ratio, 2),
                "keys_cv": round(cv, 3),
                "small_files": small_files(keys, capacity),
                "growth_s": round(sum(r.growth_s), 2),
                "growth_steps": len(r.growth_s),
                "compaction_s": round(sum(r.compact_s), 2),
                "growth_bytes_share": round(r.growth_bytes / table_bytes, 3) if table_bytes else 0,
                "table_bytes": table_bytes,
                "lookup_ms_median": round(statistics.median(lookups[r.scheme]) * 1000, 1),
            },
        )
        rows.append(m)
    _print_table(rows)
    save_png(layouts, capacity, Path(png))
    return print_report(
        "engines",
        "rows",
        rows,
        capacity=capacity,
        png=png,
        final_keys=int(len(final_ids)),
        partition_weights=list(WEIGHTS),
    )


def _churn(
    rt: Runtime, runs: list[Run], root: Path, seen: set[int], capacity: int
) -> dict[str, Any]:
    """The churn phase on every table (module doc), and its figures."""
    from hudi import HudiReadOptions, HudiTableBuilder

    known = np.fromiter(sorted(seen), np.int64)
    deleted, upserted = churn(known)
    gone = root / "input" / "churn-delete.parquet"
    back = root / "input" / "churn-upsert.parquet"
    pq.write_table(records(deleted, UPSERTS).select(["key", "part"]), gone)
    pq.write_table(records(upserted, UPSERTS + 1), back)
    live_ids = np.union1d(np.setdiff1d(known, deleted), upserted)
    live_per_part = np.bincount(partition_of(live_ids), minlength=len(WEIGHTS))
    model = {f"key-{i:010d}" for i in live_ids.tolist()}
    out: dict[str, Any] = {
        "deleted": len(deleted),
        "upserted": len(upserted),
        "live_keys": len(live_ids),
    }
    for r in runs:
        before = Counter(r.table.stats().column("partition").to_pylist())
        steps: dict[str, tuple[Callable[[Any], Any], Path]] = {
            "delete": (r.table.delete, gone),
            "upsert": (r.table.upsert, back),
        }
        for step, (write, path) in steps.items():
            df = rt.spark.read.parquet(str(path))
            r.churn_s[step] = timed(functools.partial(write, df))[0]
        r.keys_per_partition = {f"part=p{i}": int(n) for i, n in enumerate(live_per_part)}
        r.grow(UPSERTS)
        layout = live_layout(r.table)
        live = [n for buckets in layout.values() for n in buckets.values()]
        files = r.table.stats()
        buckets = Counter(files.column("partition").to_pylist())
        ratio, cv = skew(live)
        need = {p: sum(b.values()) for p, b in layout.items()}
        read = HudiTableBuilder.from_base_uri(r.table.uri).build().read(HudiReadOptions())
        keys = [k for b in read for k in b.column("key").to_pylist()]
        out[r.scheme] = {
            "delete_s": round(r.churn_s["delete"], 2),
            "upsert_s": round(r.churn_s["upsert"], 2),
            "buckets": int(files.num_rows),
            "live_max_over_median": round(ratio, 2),
            "live_cv": round(cv, 3),
            "buckets_beyond_need": beyond_need(buckets, need, capacity),
            "opened": sum(buckets.values()) - sum(before.values()),
            "opened_beyond_need": opened_beyond_need(before, buckets, need, capacity),
            "hudi_rs_one_row_per_key": len(keys) == len(set(keys)) and set(keys) == model,
        }
    print(
        f"\nchurn: {out['deleted']:,} keys deleted, {out['upserted']:,} upserted "
        f"({round(len(deleted) * CHURN_RETURNS):,} back, the rest new); live keys "
        f"{out['live_keys']:,}\n"
        f"{'scheme':<18}{'delete s':>9}{'upsert s':>9}{'buckets':>9}{'opened':>7}"
        f"{'opened>need':>12}{'beyond need':>12}"
        f"{'max/med':>9}{'CV':>7}{'hudi-rs':>9}"
    )
    for r in runs:
        c = out[r.scheme]
        print(
            f"{r.scheme:<18}{c['delete_s']:>9}{c['upsert_s']:>9}{c['buckets']:>9}"
            f"{c['opened']:>7}{c['opened_beyond_need']:>12}{c['buckets_beyond_need']:>12}"
            f"{c['live_max_over_median']:>9}{c['live_cv']:>7}"
            f"{'1/key' if c['hudi_rs_one_row_per_key'] else 'WRONG':>9}"
        )
    return out


def _print_table(rows: list[Measurement]) -> None:
    print(
        f"\n{'scheme':<18}{'rows/s':>10}{'buckets':>9}{'max/med':>9}{'CV':>7}"
        f"{'small':>7}{'growth s':>10}{'rewritten':>11}{'compact s':>11}"
        f"{'lookup ms':>11}"
    )
    for m in rows:
        e = m.extra
        print(
            f"{m.case:<18}{e['rows_per_s_median']:>10,}{e['buckets']:>9}"
            f"{e['keys_max_over_median']:>9}{e['keys_cv']:>7}{e['small_files']:>7}"
            f"{e['growth_s']:>10}{e['growth_bytes_share']:>11.1%}"
            f"{e['compaction_s']:>11}{e['lookup_ms_median']:>11}"
        )
    for m in rows:
        per = " ".join(
            f"{p.split('=')[1]}:{n}" for p, n in m.extra["buckets_per_partition"].items()
        )
        print(f"  {m.case:<16} buckets per partition: {per}")


def save_png(layouts: dict[str, pa.Table], capacity: int, target: Path) -> None:
    """One panel per scheme: keys per bucket, buckets grouped by partition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(layouts), 1, figsize=(11, 2.4 * len(layouts) + 0.6), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, (scheme, stats) in zip(axes[:, 0], layouts.items(), strict=True):
        rows = sorted(stats.to_pylist(), key=lambda r: (r["partition"], r["bucket"]))
        parts = sorted({r["partition"] for r in rows})
        x = list(range(len(rows)))
        ax.bar(
            x,
            [r["keys"] for r in rows],
            color=[colors(parts.index(r["partition"]) % 10) for r in rows],
        )
        ax.axhline(capacity, color="#c0392b", linestyle="--", linewidth=1)
        ax.set_ylabel("keys")
        ax.set_title(f"{scheme}: {len(rows)} buckets", loc="left", fontsize=10)
        ax.set_xticks([])
        for p in parts:
            at = [i for i, r in enumerate(rows) if r["partition"] == p]
            ax.text(statistics.fmean(at), capacity * 1.02, p.split("=")[1], ha="center", fontsize=7)
    axes[-1, 0].set_xlabel("buckets, grouped and coloured by partition (dashed: capacity)")
    fig.suptitle("bench schemes: keys per bucket per partition, per scheme")
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
