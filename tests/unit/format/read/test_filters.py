"""Filtered reads (``format/read/filters.py``): what a filter keeps equals the whole read
filtered after, on merge-on-read slices with logs too (a row whose latest version fails the
filter never comes back from an older one); partitions a filter rules out are not read
(shown by making their files unreadable), and row groups whose statistics rule it out are
not read (shown by the bytes read).

The random sequences are sampled by a seed that changes per run (printed;
``DYNBUCKET_FILTER_SEED`` repeats one, ``DYNBUCKET_FILTER_SEQUENCES`` runs more)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from dynbucket import DynamicBucketIndex, InvalidInputError, Table, TableCorruptedError
from dynbucket.format.file_group import writer

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("note", pa.string())]
)
SEED = int(os.environ.get("DYNBUCKET_FILTER_SEED", time.time_ns() % 100_000))
SEQUENCES = int(os.environ.get("DYNBUCKET_FILTER_SEQUENCES", "1"))


def _filter(rng: random.Random) -> pc.Expression:
    """A random filter over partition and data fields, of and, or, not and null tests."""
    atoms = [
        lambda: pc.field("day") == f"d{rng.randrange(4)}",
        lambda: pc.field("day").isin([f"d{rng.randrange(4)}", f"d{rng.randrange(4)}"]),
        lambda: pc.field("v") < rng.randrange(-10, 200),
        lambda: pc.field("v") >= rng.randrange(-10, 200),
        lambda: pc.field("note").is_null(),
        lambda: pc.field("id") < f"k{rng.randrange(60):03d}",
    ]

    def make(depth: int) -> pc.Expression:
        kind = rng.random()
        if depth == 0 or kind < 0.4:
            return rng.choice(atoms)()
        if kind < 0.65:
            return make(depth - 1) & make(depth - 1)
        if kind < 0.9:
            return make(depth - 1) | make(depth - 1)
        return ~make(depth - 1)

    return make(2)


def _batch(rng: random.Random, step: int) -> pa.Table:
    keys = rng.sample(range(60), rng.randrange(5, 30))
    return pa.table(
        {
            "id": [f"k{k:03d}" for k in keys],
            "day": [f"d{k % 3}" for k in keys],
            "v": [rng.randrange(-5, 200) for _ in keys],
            "note": [None if rng.random() < 0.3 else f"n{step}" for _ in keys],
            "_hoodie_is_deleted": [rng.random() < 0.15 for _ in keys],
        }
    )


@pytest.mark.parametrize("sequence", range(SEQUENCES))
def test_a_filtered_read_is_the_read_filtered(tmp_path: Path, sequence: int) -> None:
    seed = SEED * 100 + sequence
    print(f"filter sequence seeded {seed} (DYNBUCKET_FILTER_SEED={SEED})")
    rng = random.Random(seed)
    table_type = rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"])
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "v",
        index=DynamicBucketIndex(max_keys_per_bucket=rng.choice([4, 50])),
        options={
            "hoodie.table.type": table_type,
            "hoodie.datasource.compaction.async.enable": False,
            "hoodie.compact.inline.max.delta.commits": 4,
        },
    )
    with t:
        for step in range(8):
            t.upsert(_batch(rng, step))
            for _ in range(4):
                f = _filter(rng)
                whole = t.to_arrow(meta_columns=False).filter(f).sort_by("id")
                got = t.to_arrow(filter=f, meta_columns=False).sort_by("id")
                assert got.equals(whole), f"step {step}, filter {f}"
                some = t.to_arrow(filter=f, columns=["v"], meta_columns=False)
                assert sorted(some.column("v").to_pylist()) == sorted(whole.column("v").to_pylist())
        changed = t.changes("000", filter=f, meta_columns=False).sort_by("id")
        assert changed.equals(t.to_arrow(meta_columns=False).filter(f).sort_by("id"))


def _spoil(files: list[Path]) -> None:
    for f in files:
        f.write_bytes(b"not parquet, not a log")


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_partitions_a_filter_rules_out_are_not_read(tmp_path: Path, table_type: str) -> None:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", "v", options={"hoodie.table.type": table_type}
    )
    rows = pa.table(
        {
            "id": [f"k{i:03d}" for i in range(30)],
            "day": [f"d{i % 3}" for i in range(30)],
            "v": list(range(30)),
            "note": ["x"] * 30,
        }
    )
    t.upsert(rows)
    t.upsert(rows.slice(0, 9).set_column(2, "v", pa.array(range(100, 109), pa.int64())))
    expected = t.to_arrow(meta_columns=False).filter(pc.field("day") == "d1").sort_by("id")
    assert expected.num_rows == 10
    _spoil([p for d in ("day=d0", "day=d2") for p in (tmp_path / "t" / d).iterdir()])
    wanted = (pc.field("day") == "d1") & (pc.field("v") >= 0)
    assert t.to_arrow(filter=wanted, meta_columns=False).sort_by("id").equals(expected)
    with pytest.raises(TableCorruptedError):
        t.to_arrow()  # the others are unreadable indeed


class _Counting(pafs.FileSystemHandler):
    """A local filesystem that counts the bytes read from it."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()
        self.read = 0

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a read wrote or changed something")

    copy_file = create_dir = delete_dir = delete_dir_contents = delete_file = _refuse
    delete_root_dir_contents = move = open_append_stream = open_output_stream = _refuse

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(selector)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._counted(self.fs.open_input_file(path))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._counted(self.fs.open_input_stream(path))

    def _counted(self, f: pa.NativeFile) -> pa.NativeFile:
        handler = self

        class Counted:
            def __getattr__(self, name: str) -> Any:
                return getattr(f, name)

            def read(self, n: int = -1) -> bytes:
                data = f.read(n)
                handler.read += len(data)
                return data

            def read_at(self, n: int, offset: int) -> bytes:
                data = f.read_at(n, offset)
                handler.read += len(data)
                return data

            def readinto(self, buffer: Any) -> int:
                n = f.readinto(buffer)
                handler.read += n
                return n

            def read_buffer(self, n: int = -1) -> pa.Buffer:
                data = f.read_buffer(n)
                handler.read += data.size
                return data

            def readable(self) -> bool:
                return True

            def seekable(self) -> bool:
                return True

        return pa.PythonFile(Counted(), mode="r")


def test_row_groups_a_filter_rules_out_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "BASE_ROW_GROUP_ROWS", 2_000)  # several row groups a file
    ids = [f"k{i:06d}" for i in range(20_000)]
    rows = pa.table(
        {
            "id": ids,
            "day": ["d"] * 20_000,
            "v": list(range(20_000)),
            "note": [f"a note of some length, {i}" for i in range(20_000)],
        }
    )
    Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "v",
        options={"hoodie.table.type": "COPY_ON_WRITE"},
    ).upsert(rows)
    counting = _Counting()
    t = Table.open(str(tmp_path / "t"), filesystem=pafs.PyFileSystem(counting))
    t.to_arrow()
    whole, counting.read = counting.read, 0
    few = t.to_arrow(filter=pc.field("id") < "k001000", meta_columns=False)
    assert few.num_rows == 1000
    print(f"bytes read: {counting.read:,} filtered, {whole:,} whole")
    assert counting.read < whole / 3


def test_a_filter_that_is_no_expression_of_the_fields_is_refused(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    with pytest.raises(InvalidInputError, match=r"filter \(nope == 1\): No match .*\(id, day"):
        t.to_arrow(filter=pc.field("nope") == 1)
    with pytest.raises(InvalidInputError, match="a filter is a pyarrow compute expression"):
        t.to_arrow(filter="day = 'd1'")  # type: ignore[arg-type]
