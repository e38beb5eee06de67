"""The services a write makes due, and a table that looks after itself: through one
``Table``, with the default options, compaction, cleaning, index compaction and archival
run without being asked, the table stays within the bounds the options give, and both
readers read it as the model says."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.index.file_names import index_files
from dynbucket.format.services.due import Upkeep, due
from dynbucket.format.services.service import AUTOMATIC
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Instant, State
from dynbucket.format.timeline.transaction import WrittenFile
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


class _Timeline:
    """The instants ``due`` counts, without a table."""

    def __init__(self, actions: list[str]) -> None:
        from dynbucket.format.timeline.timeline import Instant, State

        self._instants = [
            Instant(f"{20260101000000000 + i}", a, State.COMPLETED) for i, a in enumerate(actions)
        ]

    def instants(self) -> list[object]:
        return self._instants


def _spec(**options: object) -> TableSpec:
    return TableSpec(SCHEMA, ("id",), ("day",), options=TableOptions(**options))  # type: ignore[arg-type]


def _log(version: int, partition: str = "day=d1") -> WrittenFile:
    return WrittenFile(partition, f"/t/{partition}/x", "log", 1, 1, log_version=version)


def _due(*actions: str) -> Upkeep:
    """What a write makes due when it is ``actions``, with the table's thresholds."""
    return Upkeep(dict.fromkeys(actions, AUTOMATIC))


def test_what_a_write_makes_due() -> None:
    spec = _spec()
    quiet = _Timeline(["commit"] * 3)
    assert not due(spec, [_log(4)], quiet)  # type: ignore[arg-type]
    assert due(spec, [_log(4), _log(5)], quiet) == _due("compaction")  # type: ignore[arg-type]
    # Logs under compaction.log-size-ratio of their base: a log compaction instead.
    small = WrittenFile(
        "day=d1", "/t/x", "log", 1, 1, "g1", slice_logs=5, base_bytes=1000, log_bytes=199
    )
    assert due(spec, [small], quiet) == _due("logcompaction")  # type: ignore[arg-type]
    large = WrittenFile(
        "day=d1", "/t/y", "log", 1, 1, "g2", slice_logs=5, base_bytes=1000, log_bytes=200
    )
    both = due(spec, [small, large], quiet)  # type: ignore[arg-type]
    assert both == _due("compaction", "logcompaction")
    # Each names the groups it is due for (a pending plan of them all: nothing new is due).
    assert both.services["compaction"].groups == {"g2"}
    assert both.services["logcompaction"].groups == {"g1"}
    assert due(_spec(log_compaction_enable=False), [small], quiet) == _due("compaction")  # type: ignore[arg-type]
    index = WrittenFile("day=d2", "/t/i", "index", 1, 1)
    assert due(spec, [index], quiet).index_partitions == ("day=d2",)  # type: ignore[arg-type]
    # Cleaning: five data commits (writes or compactions) since the last clean.
    assert due(spec, [], _Timeline(["clean"] + ["commit"] * 4 + ["compaction"])).services.get(
        "clean"
    )  # type: ignore[arg-type]
    assert not due(spec, [], _Timeline(["commit"] * 5 + ["clean"] + ["commit"] * 4)).services.get(
        "clean"
    )  # type: ignore[arg-type]
    # Archival: more instants than hoodie.keep.max.commits.
    assert due(spec, [], _Timeline(["commit"] * 31)).archive  # type: ignore[arg-type]
    # ... unless the oldest is pending (a compaction holds archival back: nothing would go).
    held = _Timeline(["commit"] * 31)
    held._instants[0] = Instant(held._instants[0].id, "compaction", State.INFLIGHT)
    assert not due(spec, [], held).archive  # type: ignore[arg-type]
    assert not due(spec, [], _Timeline(["commit"] * 30)).archive  # type: ignore[arg-type]
    # Each can be switched off.
    off = _spec(
        compaction_async=False,
        clean_automatic=False,
        archive_automatic=False,
        index_compaction_automatic=False,
    )
    assert not due(off, [_log(9), index], _Timeline(["commit"] * 40))  # type: ignore[arg-type]
    # A copy-on-write table has nothing to compact.
    assert not due(_spec(table_type="COPY_ON_WRITE"), [_log(9)], quiet).services  # type: ignore[arg-type]


def test_a_table_of_many_small_writes_looks_after_itself(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    rng = np.random.default_rng(3)
    model: dict[str, int] = {}
    ran: Counter[str] = Counter()
    for w in range(70):
        new = [f"k{w}-{i}" for i in range(20)]
        earlier, slots = rng.integers(0, max(w, 1), 20), rng.integers(0, 20, 20)
        old = [f"k{a}-{b}" for a, b in zip(earlier, slots, strict=True)]
        ids = list(dict.fromkeys(new + (old if w else [])))
        day = [f"d{int(i.split('-')[1]) % 3}" for i in ids]
        result = t.upsert(pa.table({"id": ids, "day": day, "v": [w] * len(ids)}, schema=SCHEMA))
        model.update(dict.fromkeys(ids, w))
        ran.update(s.split()[0] for s in result.services)
    t.wait_for_services()
    assert {"compaction", "clean", "index-compaction", "archive"} <= set(ran), ran
    # Within the bounds the defaults give (docs/soak.md): slices compacted every 5 logs
    # and cleaned to 10 retained commits; 20-30 instants active; an index compacted at 8.
    groups: Counter[str] = Counter()
    for partition in ("day=d0", "day=d1", "day=d2"):
        for f in data_files(t._store, partition):
            groups[f.file_id] += 1
        assert len(index_files(t._store, partition)) <= 8 + 10
    assert max(groups.values()) <= 2 * (10 + 5)
    assert len(t._timeline.instants()) <= 30 + 3
    rows = t.to_arrow(meta_columns=False)
    assert (
        dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True)) == model
    )
    check_hudi_reads(t)
    assert t.check().healthy
    t.close()
