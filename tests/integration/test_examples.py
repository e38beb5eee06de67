"""The scripts in ``examples/`` run and leave the tables they promise (on the shared runtime;
their ``__main__`` blocks only wrap ``main`` in a ``Runtime``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.runtime import Runtime

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_batch_upsert_example(
    runtime: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _load("batch_upsert").main(str(tmp_path / "users"), runtime)
    rows = table.to_arrow().to_pylist()
    plans = {r["user_id"]: r["plan"] for r in rows}
    assert len(plans) == 6_999 and "u1" not in plans
    assert plans["u5"] == "pro" and plans["u6"] == "free" and plans["u6500"] == "free"
    assert {r["_partition"] for r in rows} == {"country=de", "country=fr", "country=us"}
    assert max(table.stats().column("keys").to_pylist()) <= 1_000
    out = capsys.readouterr().out
    assert "1000 updated, 2000 inserted" in out and "1 deleted" in out
    assert "lookup u5: [('u5', 'us', 'pro')]" in out  # where the key is


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_stream_from_folder_example(runtime: Runtime, tmp_path: Path) -> None:
    example = _load("stream_from_folder")
    incoming, path = tmp_path / "incoming", str(tmp_path / "sensors")
    incoming.mkdir()

    def land(n: int, readings: list[tuple[str, str, float, int]]) -> None:
        cols: Any = list(zip(*readings, strict=True))
        pq.write_table(
            pa.table(dict(zip(example.SCHEMA.names, cols, strict=True)), schema=example.SCHEMA),
            incoming / f"{n}.parquet",
        )

    land(0, [(f"s{i}", f"site{i % 2}", 1.0, 1) for i in range(100)])
    land(1, [(f"s{i}", f"site{i % 2}", 2.0, 2) for i in range(50, 150)])
    table = example.main(str(incoming), path, runtime)
    assert len(table.history()) == 2
    # Run again after a new file landed: the table is reopened, only the new file is read.
    land(2, [("s0", "site0", 0.5, 0), ("s7", "site1", 3.0, 3)])  # s0's reading is older
    table = example.main(str(incoming), path, runtime)
    assert len(table.history()) == 3
    live = {r["sensor"]: r["reading"] for r in table.to_arrow().to_pylist()}
    assert len(live) == 150
    assert (live["s0"], live["s7"], live["s60"], live["s120"]) == (1.0, 3.0, 2.0, 2.0)
