"""No process-wide cache outlives the table it describes (a table deleted and created
again at its path, in one process, is another table)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.format.storage import caches
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


@pytest.mark.parametrize(("before", "after"), [(9, 6), (6, 9)])
def test_a_table_created_where_another_version_was_is_written_in_its_own_layout(
    tmp_path: Path, before: int, after: int
) -> None:
    uri = str(tmp_path / "t")
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=before)) as t:
        t.upsert(ROWS)
    shutil.rmtree(uri)
    with Table.create(uri, SCHEMA, "id", "day", options=TableOptions(table_version=after)) as t:
        t.upsert(ROWS)
        assert t.to_arrow().num_rows == 10
    assert (tmp_path / "t" / ".hoodie" / "timeline").is_dir() == (after == 9)
    assert hudi_read(uri).num_rows == 10
    assert _other_process_rows(uri) == 10


def test_kept_values_go_least_recently_used_first_past_their_sizes_limit() -> None:
    kept: caches.Kept[str, bytes] = caches.Kept(10, size=len, largest=6)
    loads: list[str] = []

    def load(key: str, value: bytes) -> bytes:
        return kept.read(key, lambda: loads.append(key) or value)

    assert load("a", b"aaaa") == b"aaaa" and load("b", b"bbbb") == b"bbbb"
    assert load("a", b"other") == b"aaaa"  # kept: not read again, a the most recent now
    assert load("c", b"cccc") == b"cccc"  # 12 bytes > 10: b, the least recently used, goes
    assert sorted(kept) == ["a", "c"] and loads == ["a", "b", "c"]
    assert load("d", b"ddddddd") == b"ddddddd" and "d" not in list(kept)  # over largest
    assert kept.put("a", b"late") == b"aaaa"  # a thread that read it too gets the kept one
    assert kept.pop("a") == b"aaaa" and kept.pop("a", b"none") == b"none"
    assert load("e", b"eeeeee") == b"eeeeee" and sorted(kept) == ["c", "e"]  # 4 + 6 fit


def test_forget_drops_a_tables_kept_values_and_nothing_else(tmp_path: Path) -> None:
    kept: caches.Kept[str, int] = caches.per_table(caches.Kept(100))
    root = str(tmp_path / "t")
    kept.put(f"{root}/a.parquet\0size", 1)
    kept.put(f"{root}2/a.parquet\0size", 2)  # another table whose path starts alike
    caches.forget(root, root)
    assert list(kept) == [f"{root}2/a.parquet\0size"]
