"""The table version gate: a table Apache Hudi wrote, or one of ours a Hudi 1.x writer
upgraded, is refused by name before anything is read or written, never read as empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import NotAdoptedError, TableExistsError, UnsupportedTableVersionError
from dynbucket.cli.ingest import Definition, table_definition
from dynbucket.format.health.check import check
from dynbucket.format.hudi import commit_avro, properties, versions
from dynbucket.format.storage.store import TableStore
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads
from tests.hudi_tables import tree, unzipped

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("sample_table/mor/parquet/v6_nonpartitioned", "6"),
        ("sample_table/cow/v8_nonpartitioned", "8"),
        ("sample_table/mor/avro/v9_txns_nonpart_nometa", "9"),
    ],
)
def test_a_table_hudi_wrote_is_named_and_left_alone(
    tmp_path: Path, name: str, version: str
) -> None:
    root = unzipped(name, tmp_path)
    before = tree(root)
    with pytest.raises(
        NotAdoptedError,
        match=f"written by Apache Hudi \\(Hudi table version "
        f"{version}, .*adopt it .*dynbucket adopt",
    ):
        Table.open(str(root))
    with pytest.raises(TableExistsError, match=f"written by Apache Hudi.*version {version}"):
        Table.create(str(root), SCHEMA, "id")
    # ``ingest --key`` says so before Ray and Spark start: no table is created over it.
    with pytest.raises(NotAdoptedError):
        table_definition(str(root), Definition(("id",), None, None, None))
    report = check(TableStore.at(str(root)))
    assert not report.healthy
    (finding,) = report.findings
    assert finding.problem.startswith("written by Apache Hudi, not adopted")
    assert "backup" not in str(report.findings)
    assert tree(root) == before


def _upgraded_to_9(root: Path) -> None:
    """What a Hudi 1.x writer does to a version 6 table it writes (auto upgrade): version
    9 properties, the active timeline moved under ``.hoodie/timeline/`` with completion
    times in the names of completed instants and their metadata in Avro."""
    hoodie = root / ".hoodie"
    props = properties.loads((hoodie / "hoodie.properties").read_bytes())
    props.update(
        {
            versions.TABLE_VERSION: "9",
            versions.TIMELINE_LAYOUT: "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
        }
    )
    (hoodie / "hoodie.properties").write_bytes(properties.dumps(props, "upgraded"))
    (hoodie / "timeline").mkdir()
    for f in sorted(hoodie.iterdir()):
        m = re.fullmatch(r"(\d{17})\.(\w+)(\.(requested|inflight))?", f.name)
        if m is None:
            continue
        if m.group(3) is not None:
            f.rename(hoodie / "timeline" / f.name)
            continue
        done = hoodie / "timeline" / f"{m.group(1)}_{m.group(1)}.{m.group(2)}"
        done.write_bytes(commit_avro.encode(json.loads(f.read_bytes())))
        f.unlink()


def test_a_table_a_hudi_1x_writer_upgraded_continues_in_its_version(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d2"], "v": [1, 2]}, schema=SCHEMA))
    t.close()
    root = tmp_path / "t"
    _upgraded_to_9(root)
    # Opened in its version (never read as empty), written on in it, read by hudi-rs.
    t = Table.open(str(root))
    assert sorted(t.to_arrow(columns=["id", "v"]).select(["id", "v"]).to_pylist(), key=str) == [
        {"id": "a", "v": 1},
        {"id": "b", "v": 2},
    ]
    t.upsert(pa.table({"id": ["a", "c"], "day": ["d1", "d1"], "v": [10, 3]}, schema=SCHEMA))
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"a": 10, "b": 2, "c": 3}
    assert t.compact().files_written > 0
    done = [p.name for p in (root / ".hoodie" / "timeline").iterdir() if "_" in p.name]
    assert len(done) == 3 and all(
        p.read_bytes()[:4] == b"Obj\x01" for p in (root / ".hoodie" / "timeline").glob("*_*")
    )
    assert (
        properties.loads((root / ".hoodie" / "hoodie.properties").read_bytes())[
            versions.TABLE_VERSION
        ]
        == "9"
    )
    check_hudi_reads(t)
    t.close()
    # Properties that still say 6 beside a layout-2 timeline: refused, nothing read.
    props = properties.loads((root / ".hoodie" / "hoodie.properties").read_bytes())
    props.update({versions.TABLE_VERSION: "6", versions.TIMELINE_LAYOUT: "1"})
    (root / ".hoodie" / "hoodie.properties").write_bytes(properties.dumps(props, "half"))
    before = tree(root)
    with pytest.raises(
        UnsupportedTableVersionError,
        match="with a timeline of layout 2.*Nothing was read or written",
    ):
        Table.open(str(root))
    (finding,) = check(TableStore.at(str(root))).findings
    assert "layout 2" in finding.problem and "backup" not in finding.fix
    assert tree(root) == before


def test_the_gate_passes_the_versions_dynbucket_writes_only() -> None:
    ours = {versions.TABLE_VERSION: "6", versions.TIMELINE_LAYOUT: "1"}
    assert versions.unsupported(ours, layout_2_timeline=False) is None
    assert versions.unsupported(ours, layout_2_timeline=True) is not None
    for version in ("8", "9"):  # adopted tables keep theirs
        found = {versions.TABLE_VERSION: version, versions.TIMELINE_LAYOUT: "2"}
        assert versions.unsupported(found, layout_2_timeline=True) is None
    for version, layout in (("8", "1"), ("10", "2"), ("5", "1"), ("6", "0")):
        found = {versions.TABLE_VERSION: version, versions.TIMELINE_LAYOUT: layout}
        assert versions.unsupported(found, layout_2_timeline=False) == (
            f"Hudi table version {version}, timeline layout {layout}, COPY_ON_WRITE"
        )
    assert "version (none)" in str(versions.unsupported({}, layout_2_timeline=False))
