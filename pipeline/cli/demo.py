"""``dynbucket demo``: stream a synthetic workload into a table and show what the index did.

The workload, one Parquet file per micro-batch, streamed with Spark Structured Streaming
(``availableNow``, one file per trigger), each micro-batch one instant:

* a growing key space: every batch brings new keys;
* updates: a share of each batch rewrites keys of earlier batches (they keep their bucket);
* skewed partitions: most records land in one region, few in the last.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.options import DynamicBucketIndex
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
    results: list[tuple[int, WriteResult, float]] = field(default_factory=list)


def workload(folder: Path, batches: int, rows: int, update_share: float, seed: int = 7) -> None:
    """Writes ``batches`` Parquet files of ``rows`` records each into ``folder``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    next_key = 0
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
        pq.write_table(table, folder / f"batch-{b:05d}.parquet")


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
) -> DemoRun:
    """Creates the table, streams the workload, prints figures, saves the PNG."""
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
        runtime=rt,
    )
    print(
        f"table: {table_dir}\nstreaming {batches} micro-batches of {rows:,} records "
        f"(30% updates of earlier keys; regions {dict(zip(REGIONS, SKEW, strict=True))})",
        file=out,
    )
    run = DemoRun(table)
    started = [time.perf_counter()]

    def on_batch(batch_id: int, result: WriteResult) -> None:
        now = time.perf_counter()
        run.results.append((batch_id, result, now - started[0]))
        started[0] = now
        _progress(len(run.results), batches)

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
    _print_batches(run, out)
    layout = table.stats()
    _print_layout(layout, keys_per_bucket, out)
    ours = table.to_arrow(columns=["order_id"], meta_columns=False).num_rows
    print(
        f"\nread back with hudi-rs: {hudi_rows(table.uri):,} rows (dynbucket reads {ours:,}; "
        f"the table is an Apache Hudi {table._spec.options.table_type} table)",
        file=out,
    )
    if png != "":
        target = Path(png) if png else workdir / "buckets.png"
        save_png(layout, keys_per_bucket, target)
        print(f"\nsaved keys per bucket per partition: {target}", file=out)
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


def _print_batches(run: DemoRun, out: TextIO) -> None:
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


def _print_layout(layout: pa.Table, cap: int, out: TextIO) -> None:
    print(f"\nfinal bucket layout (capacity {cap:,} keys per bucket)", file=out)
    rows = layout.to_pylist()
    for partition in sorted({r["partition"] for r in rows}):
        mine = sorted((r for r in rows if r["partition"] == partition), key=lambda r: r["bucket"])
        cells = " ".join(f"{r['bucket']}:{r['keys']:,}" for r in mine)
        print(f"  {partition:<12} {len(mine):>3} buckets  {cells}", file=out)


def save_png(layout: pa.Table, cap: int, target: Path) -> None:
    """A bar chart of keys per bucket, one panel per partition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = layout.to_pylist()
    partitions = sorted({r["partition"] for r in rows})
    fig, axes = plt.subplots(
        len(partitions), 1, figsize=(9, 1.8 * len(partitions) + 0.6), squeeze=False, sharex=True
    )
    for ax, partition in zip(axes[:, 0], partitions, strict=True):
        mine = sorted((r for r in rows if r["partition"] == partition), key=lambda r: r["bucket"])
        ax.bar([r["bucket"] for r in mine], [r["keys"] for r in mine], color="#3b75af")
        ax.axhline(cap, color="#c0392b", linestyle="--", linewidth=1)
        ax.set_ylabel("keys")
        ax.set_title(partition, loc="left", fontsize=10)
    axes[-1, 0].set_xlabel("bucket id (dashed line: capacity)")
    fig.suptitle("dynbucket: keys per bucket per partition")
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
