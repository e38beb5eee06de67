"""Publishing files (one, or a batch at once): whole or not at all, and on disk (file and
folder flushed) before the call returns, so that a completed instant never names a file a
power cut could lose."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.format.services.clean import writer_of_temporary
from dynbucket.format.storage import store as storage
from dynbucket.format.storage.store import (
    TEMPORARY,
    TableStore,
    WriteBatch,
    final_name,
    temporary_name,
)


@pytest.fixture()
def flushed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = storage._fsync

    def record(path: str) -> None:
        calls.append(path)
        real(path)

    monkeypatch.setattr(storage, "_fsync", record)
    return calls


@pytest.mark.parametrize("how", ["write_atomic", "write_file", "write_parquet"])
def test_a_published_file_and_its_folder_are_flushed(
    tmp_path: Path, flushed: list[str], how: str
) -> None:
    store = TableStore.at(str(tmp_path))
    target = store.path("p=1", "f.bin")
    if how == "write_parquet":
        store.write_parquet(target, pa.table({"x": [1]}))
    else:
        getattr(store, how)(target, b"data")
    tmp, folder = flushed
    assert Path(tmp).parent == Path(target).parent and Path(tmp).name.startswith(".f.bin.tmp-")
    assert folder == str(tmp_path / "p=1")  # after the rename
    assert [p.name for p in (tmp_path / "p=1").iterdir()] == ["f.bin"]


def test_a_liveness_file_is_published_whole_without_waiting_for_the_disk(
    tmp_path: Path, flushed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = TableStore.at(str(tmp_path))
    target = store.path("hb", "x.heartbeat")
    store.write_atomic(target, b"first", durable=False)
    store.write_atomic(target, b"second", durable=False)
    assert Path(target).read_bytes() == b"second" and flushed == []
    assert [p.name for p in (tmp_path / "hb").iterdir()] == ["x.heartbeat"]

    def broken(*_: object) -> None:
        raise OSError("rename failed")

    monkeypatch.setattr(storage.os, "replace", broken)
    with pytest.raises(OSError, match="rename failed"):
        store.write_atomic(target, b"third", durable=False)
    assert Path(target).read_bytes() == b"second"  # the old content, no temporary left
    assert [p.name for p in (tmp_path / "hb").iterdir()] == ["x.heartbeat"]


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))

    def broken(target: str) -> None:
        Path(target).write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        store._publish(store.path("f.bin"), broken)
    assert list(tmp_path.iterdir()) == []


def test_a_batch_puts_files_in_place_only_once_all_are_flushed(
    tmp_path: Path, flushed: list[str]
) -> None:
    store = TableStore.at(str(tmp_path))
    batch = WriteBatch(store)
    targets = [store.path(f"p={i % 2}", f"f{i}.bin") for i in range(4)]
    for i, target in enumerate(targets):
        assert batch.write_file(target, [b"da", b"ta", bytes([i])]) == 5
    batch.write_parquet(store.path("p=0", "g.parquet"), pa.table({"x": [1]}))
    assert not any(Path(t).exists() for t in targets)  # not before publish
    assert flushed == []
    batch.publish()
    assert [Path(t).read_bytes() for t in targets] == [b"data" + bytes([i]) for i in range(4)]
    files, folders = flushed[:5], flushed[5:]
    assert all(Path(f).name.startswith(".") and ".tmp-" in f for f in files)  # then renamed
    assert sorted(folders) == [str(tmp_path / "p=0"), str(tmp_path / "p=1")]  # once each
    assert sorted(p.name for p in (tmp_path / "p=0").iterdir()) == ["f0.bin", "f2.bin", "g.parquet"]


def test_a_discarded_batch_leaves_nothing(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    batch = WriteBatch(store)
    batch.write_file(store.path("p=1", "f.bin"), b"data")
    batch.discard()
    batch.publish()  # nothing left to publish
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_batch_that_fails_to_publish_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also as a context manager: its publish at the end of the block fails, and what it
    staged is discarded."""
    store = TableStore.at(str(tmp_path))

    def full(path: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(storage, "_fsync", full)
    with pytest.raises(OSError, match="disk gone"), WriteBatch(store) as batch:
        for name in ("a.bin", "b.bin"):
            batch.write_file(store.path("p=1", name), b"data")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_batch_block_publishes_at_its_end_and_discards_when_it_raises(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    with pytest.raises(ValueError, match="bad row"), WriteBatch(store) as batch:
        batch.write_file(store.path("p=1", "a.bin"), b"data")
        raise ValueError("bad row")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    with WriteBatch(store) as batch:
        batch.write_file(store.path("p=1", "b.bin"), b"data")
        assert not (tmp_path / "p=1" / "b.bin").exists()  # staged, not yet in place
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["b.bin"]


def test_a_copy_in_a_batch_is_a_file_of_its_own(tmp_path: Path) -> None:
    """A carried log is published as a copy (locally a hard link): the same bytes under the
    new name, and still there when the original is cleaned away."""
    store = TableStore.at(str(tmp_path))
    source = store.path("p", "a.log")
    store.write_atomic(source, b"log block bytes")
    batch = WriteBatch(store)
    size = batch.copy_file(source, store.path("p", "b.log"))
    assert size == len(b"log block bytes") and not Path(store.path("p", "b.log")).exists()
    batch.publish()
    store.delete(source)
    assert Path(store.path("p", "b.log")).read_bytes() == b"log block bytes"


#: Hudi's log file pattern (``FSUtils.LOG_FILE_PATTERN``; hudi-rs parses the same parts):
#: unanchored at the end, so anything after ``.log.<n>`` still makes a log file.
HUDI_LOG = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?")


@pytest.mark.parametrize(
    "name",
    [
        ".00000003-6f1c-0000-0000-000000000000_20260101000000001.log.5_0-20260101000000009-0",
        "00000003-6f1c-0000-0000-000000000000_0-20260101000000001-0_20260101000000001.parquet",
        ".commits_.archive.3_1-0-1",
    ],
)
def test_a_temporary_name_is_no_file_a_hudi_reader_lists(tmp_path: Path, name: str) -> None:
    """hudi-rs listed in-flight temporary logs (``.<log>.tmp-<hex>``) as log files, and
    failed reads when they went: a temporary name is neither a log nor a base file to
    Hudi, and still says which file (and so which writer) it was to be."""
    temp = temporary_name(name)
    assert TEMPORARY.match(temp) and not HUDI_LOG.match(temp)
    assert not temp.endswith(".parquet") and not temp.endswith(".hfile")
    assert final_name(temp) == name.lstrip(".")
    if "deltacommit" not in name and ".log." in name:
        assert writer_of_temporary(temp) == "20260101000000009"


def test_a_folder_made_while_it_is_listed_lists_without_an_error(tmp_path: Path) -> None:
    """pyarrow fails the listing of a missing folder made between its listing and its look
    whether the folder exists (about 1 in 20,000 listings beside a thread making and
    removing it, here); the store lists again. A commit's conflict check failed so while
    another writer's first archival made the archive folder."""
    store = TableStore.at(str(tmp_path / "t"))
    folder = store.path(".hoodie/.dynbucket/archive")
    done = threading.Event()

    def make_and_remove() -> None:
        while not done.is_set():
            with contextlib.suppress(FileExistsError, FileNotFoundError):
                os.makedirs(folder)
                os.rmdir(folder)

    toggler = threading.Thread(target=make_and_remove)
    toggler.start()
    try:
        for _ in range(100_000):
            assert store.list_files(folder) == []
    finally:
        done.set()
        toggler.join()
