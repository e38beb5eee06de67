"""``dynbucket demo``: stream a synthetic workload into a table and show what the index did.

The workload, one Parquet file per micro-batch, streamed with Spark Structured Streaming
(``availableNow``, one file per trigger), each micro-batch one instant:

* a growing key space: every batch brings new keys;
* updates: a share of each batch rewrites keys of earlier batches (they keep their bucket);
* skewed partitions: most records land in one region, few in the last.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.options import DynamicBucketIndex, TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write.results import WriteResult

SCHEMA = pa.schema(
    [
        ("order_id", pa.string()),
        ("region", pa.string()),
        ("amount", pa.int64()),
        ("updated_at", pa.int64()),
    ]
)
REGIONS = ["eu", "us", "ap", "sa"]
SKEW = [0.55, 0.25, 0.15, 0.05]


@dataclass
class DemoRun:
    table: Table
    workdir: Path
    """The workload, the table and the checkpoint (a temporary folder unless ``--path``)."""
    results: list[tuple[int, WriteResult, float]] = field(default_factory=list)
    layouts: list[tuple[int, pa.Table]] = field(default_factory=list)
    """Each micro-batch's bucket layout, taken when the batch completes: the services beside
    the stream may clean an early instant's slices before the stream ends."""


def workload(folder: Path, batches: int, rows: int, update_share: float, seed: int = 7) -> None:
    """Writes ``batches`` Parquet files of ``rows`` records each into ``folder``, each
    file's time a second after the one before: Spark's file stream takes files in the order
    of their times, and files written within one tick of the clock came in any order (a
    batch's updates then arrived before the keys they update, counted stale, in 5 of 12
    runs of the demo's test)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    next_key = 0
    first = time.time() - batches - 1  # all in the past: a stream takes them at once
    for b in range(batches):
        updates = int(rows * update_share) if next_key else 0
        old = rng.integers(0, next_key, updates) if updates else np.empty(0, np.int64)
        new = np.arange(next_key, next_key + rows - updates)
        next_key += len(new)
        keys = np.concatenate([old, new])
        region = np.array(REGIONS)[_region_of(keys, seed)]
        table = pa.table(
            {
                "order_id": pa.array(np.char.add("order-", keys.astype(str))),
                "region": pa.array(region),
                "amount": pa.array(rng.integers(1, 10_000, len(keys))),
                "updated_at": pa.array(np.full(len(keys), b, np.int64)),
            },
            schema=SCHEMA,
        )
        written = folder / f"batch-{b:05d}.parquet"
        pq.write_table(table, written)
        os.utime(written, (first + b, first + b))


def _region_of(keys: np.ndarray, seed: int) -> np.ndarray:
    # A key's region is fixed (a function of the key), skewed by SKEW.
    u = (np.asarray(keys, np.uint64) * np.uint64(2654435761) + np.uint64(seed)) % np.uint64(10_000)
    return np.searchsorted(np.cumsum(SKEW) * 10_000, u.astype(np.float64), side="right")


def run_demo(
    rt: Runtime,
    path: str | None,
    batches: int,
    rows: int,
    keys_per_bucket: int,
    slots: int | None,
    png: str | None,
    out: TextIO = sys.stdout,
    options: TableOptions | None = None,
) -> DemoRun:
    """Creates the table, streams the workload, prints figures, saves the PNG (by default
    into ``--path``, else into the system's temporary folder, where it replaces the last
    run's: the workload's own temporary folder is removed after the run, ``_demo``)."""
    workdir = Path(path) if path else Path(tempfile.mkdtemp(prefix="dynbucket-demo-"))
    incoming, table_dir = workdir / "incoming", workdir / "table"
    workload(incoming, batches, rows, update_share=0.3)
    table = Table.create(
        str(table_dir),
        SCHEMA,
        "order_id",
        "region",
        "updated_at",
        DynamicBucketIndex(assigner_slots=slots, max_keys_per_bucket=keys_per_bucket),
        options=options,
        runtime=rt,
    )
    print(
        f"table: {table_dir}\nstreaming {batches} micro-batches of {rows:,} records "
        f"(30% updates of earlier keys; regions {dict(zip(REGIONS, SKEW, strict=True))})",
        file=out,
    )
    run = DemoRun(table, workdir)
    started = [time.perf_counter()]

    def on_batch(batch_id: int, result: WriteResult) -> None:
        now = time.perf_counter()
        run.results.append((batch_id, result, now - started[0]))
        if result.instant:
            # Now, while it is the newest instant: no clean takes its slices yet.
            run.layouts.append((batch_id, table.stats(as_of=result.instant)))
        _progress(len(run.results), batches)
        started[0] = time.perf_counter()

    stream = (
        rt.spark.readStream.schema(_spark_schema())
        .option("maxFilesPerTrigger", 1)
        .parquet(str(incoming))
    )
    query = table.stream(
        stream, str(workdir / "checkpoint"), trigger={"availableNow": True}, on_batch=on_batch
    )
    query.awaitTermination()
    print(file=sys.stderr)
    _print_batches(run, rows, out)
    layout = table.stats()
    _print_layout(layout, keys_per_bucket, out)
    ours = table.to_arrow(columns=["order_id"], meta_columns=False).num_rows
    print(
        f"\nread back with hudi-rs: {hudi_rows(table.uri):,} rows (dynbucket reads {ours:,}; "
        f"the table is an Apache Hudi {table.spec.options.table_type} table)",
        file=out,
    )
    if png != "":
        default = (workdir if path else Path(tempfile.gettempdir())) / "dynbucket-demo.png"
        target = Path(png) if png else default
        save_png(run.layouts, keys_per_bucket, target)
        print(f"\nsaved the buckets filling, micro-batch by micro-batch: {target}", file=out)
    return run


def hudi_rows(uri: str) -> int:
    """Rows of the table's snapshot as hudi-rs (Apache Hudi's Rust reader) reads it."""
    from hudi import HudiTableBuilder

    return sum(b.num_rows for b in HudiTableBuilder.from_base_uri(uri).build().read())


def _spark_schema() -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SCHEMA)


def _progress(done: int, total: int, width: int = 30) -> None:
    filled = int(width * done / total)
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} micro-batches",
        end="",
        file=sys.stderr,
        flush=True,
    )


def _print_batches(run: DemoRun, records: int, out: TextIO) -> None:
    print(
        f"\n{'batch':>5} {'instant':>18} {'rows':>9} {'inserted':>9} {'updated':>9} "
        f"{'new buckets':>11} {'files':>6} {'seconds':>8}",
        file=out,
    )
    for batch_id, r, seconds in run.results:
        print(
            f"{batch_id:>5} {r.instant:>18} {r.rows_written:>9,} {r.keys_inserted:>9,} "
            f"{r.keys_updated:>9,} {r.buckets_created:>11} {r.files_written:>6} "
            f"{seconds:>8.1f}",
            file=out,
        )
    written = sum(r.rows_written for _, r, _ in run.results)
    total = records * len(run.results)
    if written < total:
        print(
            f"{total:,} records, {written:,} rows written: a micro-batch's updates draw earlier "
            "keys at random, some more than once, and a key's records in one micro-batch "
            "are one row (the newest; Hudi's precombine)",
            file=out,
        )


def _print_layout(layout: pa.Table, cap: int, out: TextIO) -> None:
    print(f"\nfinal bucket layout (capacity {cap:,} keys per bucket)", file=out)
    rows = layout.to_pylist()
    for partition in sorted({r["partition"] for r in rows}):
        mine = sorted((r for r in rows if r["partition"] == partition), key=lambda r: r["bucket"])
        cells = " ".join(f"{r['bucket']}:{r['keys']:,}" for r in mine)
        print(f"  {partition:<12} {len(mine):>3} buckets  {cells}", file=out)


def save_png(filling: list[tuple[int, pa.Table]], cap: int, target: Path) -> None:
    """Keys per bucket, one panel per partition, each bar stacked by the micro-batch that
    brought its keys (``filling``: each batch's layout, ``Table.stats`` as of its instant),
    with its final count on top and the capacity marked: how the index fills a bucket to
    capacity before it opens the next."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_batch = [
        {(r["partition"], r["bucket"]): r["keys"] for r in layout.to_pylist()}
        for _, layout in filling
    ]
    final = per_batch[-1] if per_batch else {}
    partitions = sorted({p for p, _ in final})
    colors = plt.get_cmap("viridis")
    fig, axes = plt.subplots(
        len(partitions) or 1,
        1,
        figsize=(10, 2.1 * max(1, len(partitions)) + 0.9),
        squeeze=False,
        sharex=True,
    )
    for ax, partition in zip(axes[:, 0], partitions, strict=False):
        buckets = sorted(b for p, b in final if p == partition)
        below = [0] * len(buckets)
        for i, counts in enumerate(per_batch):
            now = [counts.get((partition, b), 0) for b in buckets]
            added = [max(0, n - was) for n, was in zip(now, below, strict=True)]
            color = colors(i / max(1, len(per_batch) - 1))
            ax.bar(buckets, added, bottom=below, color=color, width=0.8)
            below = [was + a for was, a in zip(below, added, strict=True)]
        for b, keys in zip(buckets, below, strict=True):
            ax.annotate(f"{keys:,}", (b, keys), ha="center", va="bottom", fontsize=7)
        ax.axhline(cap, color="#c0392b", linestyle="--", linewidth=1)
        ax.annotate(
            f"capacity {cap:,}",
            (1.0, cap),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
            color="#c0392b",
        )
        ax.set_ylim(0, cap * 1.25)
        ax.set_ylabel("keys")
        ax.set_title(partition, loc="left", fontsize=10)
    axes[-1, 0].set_xlabel("bucket id")
    if per_batch:
        norm = matplotlib.colors.Normalize(0, len(per_batch) - 1)
        bar = fig.colorbar(
            matplotlib.cm.ScalarMappable(norm=norm, cmap=colors), ax=axes[:, 0], pad=0.01
        )
        bar.set_label("micro-batch that brought the keys")
    fig.suptitle("dynbucket: keys per bucket, filled micro-batch by micro-batch")
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110, bbox_inches="tight")
    plt.close(fig)
