"""``dynbucket bench soak``: a streaming table's cost over many micro-batches.

The proposal's workload is a micro-batch every few seconds for months; what matters is
that the ten-thousandth write costs what the thousandth did. Two runs, default options
(the table services on, as a user gets them):

* **in process**: ``writes`` upserts of ``rows`` rows (half new keys, half updates of keys
  already written) into a 4-partition merge-on-read table, one ``Table`` (compaction runs
  beside the writes, in a thread);
* **stream**: ``stream_batches`` micro-batches of a Structured Streaming file source
  (``maxFilesPerTrigger=1``) through ``Table.stream`` (compaction as Ray tasks).

Per window of ``window`` writes (``stream_window`` batches) it prints the write p50 and
p99, the full-read time per row, the data files, the most files of one file group, the
entries of ``.hoodie/``, the most index files of a partition and the files of the archived
timeline (``HISTORY_DIRS``: merged as they accrue, so they stay few); a PNG of these over the
run; and at the end, whether hudi-rs reads the table as dynbucket does (snapshot, and as of
every instant on the active timeline) and whether ``dynbucket check`` finds it healthy.
docs/soak.md holds a run and the bounds the defaults give.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.index.file_names import index_files
from dynbucket.format.timeline.actions import COMPACTIONS, Action
from dynbucket.options import TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table

SCHEMA = pa.schema(
    [("id", pa.string()), ("region", pa.string()), ("amount", pa.int64()), ("ts", pa.int64())]
)
REGIONS = ["eu", "us", "ap", "sa"]
#: Where the archived timeline goes: version 6's, version 9's and its metadata table's.
HISTORY_DIRS = (
    ".hoodie/archived",
    ".hoodie/timeline/history",
    ".hoodie/metadata/.hoodie/timeline/history",
)


def batch(i: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """Write ``i``: ``rows // 2`` new keys and as many updates of keys written before."""
    new = np.arange(i * rows // 2, (i + 1) * rows // 2)
    old = rng.integers(0, max(1, i * rows // 2), rows - len(new)) if i else new[: rows - len(new)]
    return rows_of(np.concatenate([new, old]), i, rng)


def rows_of(ids: np.ndarray, ts: int, rng: np.random.Generator) -> pa.Table:
    """Rows of keys ``ids`` (``k<id>``, in region ``id % 4``), ordering value ``ts``."""
    return pa.table(
        {
            "id": pa.array(np.char.add("k", ids.astype(str))),
            "region": pa.array(np.array(REGIONS)[ids % len(REGIONS)]),
            "amount": pa.array(rng.integers(0, 1_000_000, len(ids))),
            "ts": pa.array(np.full(len(ids), ts, np.int64)),
        },
        schema=SCHEMA,
    )


@dataclass
class Window:
    """The figures of one window of writes."""

    last_write: int
    seconds: list[float] = field(default_factory=list)
    read_us_per_row: float = 0.0
    rows: int = 0
    data_files: int = 0
    most_files_per_group: int = 0
    hoodie_entries: int = 0
    most_index_files: int = 0
    history_files: int = 0

    def row(self) -> dict[str, Any]:
        s = sorted(self.seconds)
        return {
            "writes": self.last_write,
            "p50_ms": round(statistics.median(s) * 1000, 1),
            "p99_ms": round(s[min(len(s) - 1, int(len(s) * 0.99))] * 1000, 1),
            "read_us_per_row": round(self.read_us_per_row, 3),
            "rows": self.rows,
            "data_files": self.data_files,
            "most_files_per_group": self.most_files_per_group,
            "hoodie_entries": self.hoodie_entries,
            "most_index_files": self.most_index_files,
            "history_files": self.history_files,
        }


def measure(table: Table, window: Window) -> None:
    """The table's shape and a full read (the median of three: services run beside it),
    at the end of a window."""
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        rows = table.to_arrow(meta_columns=False).num_rows
        seconds.append(time.perf_counter() - start)
    window.read_us_per_row = statistics.median(seconds) / max(rows, 1) * 1e6
    window.rows = rows
    store = table.store
    groups: Counter[str] = Counter()
    for partition in (f"region={r}" for r in REGIONS):
        for f in data_files(store, partition):
            groups[f.file_id] += 1
        window.most_index_files = max(window.most_index_files, len(index_files(store, partition)))
    window.data_files = sum(groups.values())
    window.most_files_per_group = max(groups.values(), default=0)
    window.hoodie_entries = len(os.listdir(os.path.join(table.uri, ".hoodie")))
    window.history_files = sum(
        len(os.listdir(folder))
        for folder in (os.path.join(table.uri, d) for d in HISTORY_DIRS)
        if os.path.isdir(folder)
    )


def new_table(path: Path, rt: Runtime | None = None, version: int = 6) -> Table:
    options = TableOptions(table_version=version)
    return Table.create(
        str(path), SCHEMA, "id", "region", ordering_field="ts", options=options, runtime=rt
    )


def soak_in_process(
    path: Path,
    writes: int,
    rows: int,
    window: int,
    report: Callable[[dict[str, Any]], None],
    version: int = 6,
) -> list[dict[str, Any]]:
    """``writes`` upserts through one in-process ``Table`` of Hudi table version
    ``version``; a row of figures per window."""
    rng = np.random.default_rng(7)
    out = []
    with new_table(path, version=version) as table:
        current = Window(window)
        for i in range(writes):
            data = batch(i, rows, rng)
            start = time.perf_counter()
            table.upsert(data)
            current.seconds.append(time.perf_counter() - start)
            if (i + 1) % window == 0 or i == writes - 1:
                current.last_write = i + 1
                measure(table, current)
                out.append(current.row())
                report(out[-1])
                current = Window(0)
        table.wait_for_services()
    return out


def soak_stream(
    rt: Runtime,
    path: Path,
    batches: int,
    rows: int,
    window: int,
    report: Callable[[dict[str, Any]], None],
) -> list[dict[str, Any]]:
    """``batches`` micro-batches of a file stream through ``Table.stream``."""
    rng = np.random.default_rng(11)
    incoming = path.parent / f"{path.name}-incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    for i in range(batches):
        pq.write_table(batch(i, rows, rng), incoming / f"part-{i:06d}.parquet")
    out: list[dict[str, Any]] = []
    with new_table(path, rt) as table:
        current = [Window(0)]
        last = [time.perf_counter()]

        def on_batch(batch_id: int, _result: Any) -> None:
            now = time.perf_counter()
            current[0].seconds.append(now - last[0])
            if (batch_id + 1) % window == 0 or batch_id == batches - 1:
                current[0].last_write = batch_id + 1
                measure(table, current[0])
                out.append(current[0].row())
                report(out[-1])
                current[0] = Window(0)
            last[0] = time.perf_counter()

        stream = (
            rt.spark.readStream.schema("id string, region string, amount long, ts long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(incoming))
        )
        query = table.stream(
            stream,
            str(path.parent / f"{path.name}-checkpoint"),
            {"availableNow": True},
            on_batch=on_batch,
        )
        query.awaitTermination()
        table.wait_for_services()
    return out


def verify(path: Path) -> dict[str, Any]:
    """hudi-rs against dynbucket (snapshot; as of each active instant) and ``check``."""
    from hudi import HudiReadOptions, HudiTableBuilder

    table = Table.open(str(path))

    def theirs(as_of: str | None) -> dict[str, int]:
        hudi = HudiTableBuilder.from_base_uri(str(path)).build()
        opts = HudiReadOptions()
        if as_of is not None:
            opts = opts.with_as_of_timestamp(as_of)
        out: dict[str, int] = {}
        for b in hudi.read(opts):
            out.update(zip(b.column("id").to_pylist(), b.column("amount").to_pylist(), strict=True))
        return out

    def ours(as_of: str | None) -> dict[str, int]:
        rows = table.to_arrow(as_of=as_of, columns=["id", "amount"], meta_columns=False)
        return dict(
            zip(rows.column("id").to_pylist(), rows.column("amount").to_pylist(), strict=True)
        )

    snapshot = table.snapshot()
    instants = [
        i.id
        for i in snapshot.timeline.completed(Action.COMMIT, *COMPACTIONS)
        if not snapshot.earliest_retained or i.id >= snapshot.earliest_retained
    ]
    equal = theirs(None) == ours(None)
    travel = sum(theirs(i) == ours(i) for i in instants)
    report = table.check()
    return {
        "hudi_rs_snapshot_equal": equal,
        "hudi_rs_time_travel_equal": f"{travel}/{len(instants)}",
        "check_healthy": report.healthy,
        "archived_instants": snapshot.timeline.archived().instants,
    }


def save_png(runs: dict[str, list[dict[str, Any]]], target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("p50_ms", "write p50 (ms)"),
        ("p99_ms", "write p99 (ms)"),
        ("read_us_per_row", "full read (µs per row)"),
        ("most_files_per_group", "most files in one file group"),
        ("hoodie_entries", "entries in .hoodie/"),
        ("most_index_files", "most index files of a partition"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        for name, rows in runs.items():
            ax.plot([r["writes"] for r in rows], [r[key] for r in rows], marker=".", label=name)
        ax.set_title(title)
        ax.set_xlabel("writes")
        ax.set_ylim(bottom=0)
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(target, dpi=90)


def run(
    rt: Runtime | None,
    writes: int,
    rows: int,
    window: int,
    stream_batches: int,
    stream_window: int,
    workdir: str | None,
    png: str | None,
    versions: tuple[int, ...] = (6,),
) -> dict[str, Any]:
    """The soak (module doc); the in-process run once per table version of ``versions``
    (one after the other, on the same workload: ``9`` against ``6`` is the cost of Hudi's
    metadata table)."""
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    checks: dict[str, dict[str, Any]] = {}

    def printer(name: str) -> Callable[[dict[str, Any]], None]:
        return lambda row: print(name, json.dumps(row), flush=True)

    for version in versions if writes else ():
        name = "in process" + (f" v{version}" if versions != (6,) else "")
        path = root / name.replace(" ", "-")
        runs[name] = soak_in_process(
            path, writes, rows, window, printer(name.replace(" ", "-")), version
        )
        checks[name] = verify(path)
    if stream_batches and rt is not None:
        path = root / "stream"
        runs["stream"] = soak_stream(
            rt, path, stream_batches, rows, stream_window, printer("stream")
        )
        checks["stream"] = verify(path)
    summary: dict[str, Any] = {"bench": "soak", "rows_per_write": rows, "checks": checks}
    for name, rows_ in runs.items():
        if len(rows_) >= 3:
            summary[f"{name}: p50 last / second window"] = round(
                rows_[-1]["p50_ms"] / rows_[1]["p50_ms"], 3
            )
            summary[f"{name}: read per row last / second window"] = round(
                rows_[-1]["read_us_per_row"] / rows_[1]["read_us_per_row"], 3
            )
        summary[f"{name}: windows"] = rows_
    if "in process v6" in runs and "in process v9" in runs:  # medians of every window's p50
        p50 = {v: statistics.median(r["p50_ms"] for r in runs[f"in process v{v}"]) for v in (6, 9)}
        summary["in process: p50 v9 / v6"] = round(p50[9] / p50[6], 3)
    target = Path(png) if png else root / "soak.png"
    if runs:
        save_png(runs, target)
        summary["png"] = str(target)
    print("BENCH " + json.dumps(summary))
    return summary
