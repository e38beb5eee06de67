"""``dynbucket bench read``: snapshot reads and the record-level index's bulk read path.

Two tables are built once (pyarrow only, no Spark):

* ``mor``: ``rows`` rows over 8 partitions, of which 20% live in log files (half of them
  updates of base rows, half new keys); the snapshot read is timed against reading the same
  live rows as plain Parquet (the same partitions and columns, one file per partition) in the
  same run, interleaved.
* ``rli``: one partition holding ``rows`` keys; ``record_index_locations`` reads its
  ``_hash`` and ``_bucket`` columns (what a slot's cache bootstraps from).
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.columns import BUCKET, HASH
from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.format.hudi import log_file
from dynbucket.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("region", pa.string()),
        ("amount", pa.int64()),
        ("ts", pa.int64()),
        ("note", pa.string()),
    ]
)
REGIONS = [f"r{i}" for i in range(8)]


def rows_table(ids: np.ndarray, seed: int, regions: list[str] = REGIONS) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table(
        {
            "id": pa.array(np.char.add("user-", ids.astype(str))),
            "region": pa.array(np.array(regions)[ids % len(regions)]),
            "amount": pa.array(rng.integers(0, 1_000_000, n)),
            "ts": pa.array(np.full(n, seed, np.int64)),
            "note": pa.array(np.char.add("n", (ids * 7 % 100_000).astype(str))),
        },
        schema=SCHEMA,
    )


def build_mor(root: Path, rows: int) -> tuple[Table, Path]:
    """The MOR table (80% base, 20% delta) and a plain Parquet copy of its live rows."""
    base_rows = int(rows * 0.9)
    table = Table.create(
        str(root / "mor"),
        SCHEMA,
        "id",
        "region",
        "ts",
        # 8 buckets per region: the base leaves room in the last one for
        # exactly the new keys, so they land in delta files too.
        DynamicBucketIndex(max_keys_per_bucket=rows // 64),
    )
    for lo in range(0, base_rows, 1_000_000):  # bulk load: base files only
        table.upsert(rows_table(np.arange(lo, min(base_rows, lo + 1_000_000)), seed=1))
    table.compact()
    updates = np.arange(0, rows // 10)  # 10% of rows: updates of base keys
    new = np.arange(base_rows, rows)  # 10%: new keys into existing buckets' deltas
    table.upsert(rows_table(np.concatenate([updates, new]), seed=2))
    plain = root / "plain"
    live = table.to_arrow(meta_columns=False)
    for region in REGIONS:
        part = live.filter(pa.compute.equal(live.column("region"), region)).drop_columns(["region"])
        (plain / f"region={region}").mkdir(parents=True)
        pq.write_table(part, plain / f"region={region}" / "part-0.parquet")
    return table, plain


def delta_share(table: Table) -> float:
    """Share of live rows that come from log files."""
    snap = table.snapshot()
    delta = sum(
        pq.ParquetFile(io.BytesIO(b.content)).metadata.num_rows
        for r in snap.slices()
        for f in r.slice.logs
        for b in log_file.read_blocks(Path(f.path).read_bytes())
        if b.type == log_file.PARQUET_DATA
    )
    return delta / max(1, snap.to_arrow(columns=["id"], meta_columns=False).num_rows)


def run(rows: int, runs: int, workdir: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        print(f"building a {rows:,}-row merge-on-read table ...", flush=True)
        table, plain = build_mor(root, rows)
        share = delta_share(table)
        print(f"building a {rows:,}-entry index partition ...", flush=True)
        rli = Table.create(str(root / "rli"), SCHEMA, "id", "region")
        for lo in range(0, rows, 1_000_000):
            rli.upsert(rows_table(np.arange(lo, min(rows, lo + 1_000_000)), 3, ["one"]))
        m_snap = Measurement("snapshot read (MOR, to_arrow)", rows)
        m_plain = Measurement("plain Parquet read (pyarrow)", rows)
        m_rli = Measurement("record_index_locations", rows)
        for r in range(runs):
            s, out = timed(lambda: table.to_arrow(meta_columns=False))
            m_snap.seconds.append(s)
            assert out.num_rows == rows, out.num_rows
            s, out = timed(lambda: pads.dataset(plain, partitioning="hive").to_table())
            m_plain.seconds.append(s)
            assert out.num_rows == rows
            s, out = timed(lambda: rli.record_index_locations("region=one", [HASH, BUCKET]))
            m_rli.seconds.append(s)
            assert out.num_rows == rows
            print(
                f"  run {r + 1}/{runs}: snapshot {m_snap.seconds[-1]:.2f}s, plain "
                f"{m_plain.seconds[-1]:.2f}s, index {m_rli.seconds[-1]:.3f}s",
                flush=True,
            )
        ratio = round(m_plain.median / m_snap.median, 3)
        return print_report(
            "read",
            "rows",
            [m_snap, m_plain, m_rli],
            delta_share=round(share, 3),
            snapshot_vs_plain_throughput=ratio,
            index_keys_per_s=round(m_rli.per_second),
        )
