"""No process-wide cache outlives the table it describes (a table deleted and created
again at its path, in one process, is another table)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from dynbucket.options import TableOptions
from dynbucket.table import Table
from tests.hudi_readers import hudi_read

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
ROWS = pa.table({"id": [f"k{i}" for i in range(10)], "day": ["d1"] * 10, "v": list(range(10))})


def _other_process_rows(uri: str) -> int:
    code = f"from dynbucket.table import Table; print(Table.open({uri!r}).to_arrow().num_rows)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_a_version_6_table_created_where_a_version_9_one_was_is_written_as_version_6(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=9)) as t:
        t.upsert(ROWS)
    shutil.rmtree(uri)
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=6)) as t:
        t.upsert(ROWS)
        assert t.to_arrow().num_rows == 10
    assert not (tmp_path / "t" / ".hoodie" / "timeline").exists()
    assert hudi_read(uri).num_rows == 10
    assert _other_process_rows(uri) == 10


def test_a_version_9_table_created_where_a_version_6_one_was_is_written_as_version_9(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=6)) as t:
        t.upsert(ROWS)
    shutil.rmtree(uri)
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=9)) as t:
        t.upsert(ROWS)
    assert (tmp_path / "t" / ".hoodie" / "timeline").is_dir()
    assert hudi_read(uri).num_rows == 10
    assert _other_process_rows(uri) == 10
