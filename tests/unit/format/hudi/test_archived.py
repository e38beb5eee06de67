"""Hudi's archived timeline of a version 6 table: every archived entry stays readable, once,
while the files it keeps stay few, however many archivals, and a merge a crash cut short
is finished by the next archival (``hudi/archived.py``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dynbucket.format.hudi import archived
from dynbucket.format.hudi.archived import ARCHIVED_DIR, MERGE_FILES, MERGE_PLAN
from dynbucket.format.storage.store import TableStore


def _entries(n: int) -> list[tuple[str, str, str]]:
    """An archival's entries: two instants, three states each."""
    ids = [f"2026112800{2 * n + i:07d}" for i in range(2)]
    return [(i, "deltacommit", s) for i in ids for s in ("REQUESTED", "INFLIGHT", "COMPLETED")]


def _read(folder: Path) -> Counter[tuple[str, str, str]]:
    """Every entry of every archive file, as Hudi's readers take them (all the files
    ``.commits_.archive*``, all their blocks), counted."""
    found: Counter[tuple[str, str, str]] = Counter()
    for f in folder.glob(".commits_.archive.*"):
        found.update(archived.read_entries(f.read_bytes()))
    return found


@pytest.mark.parametrize("archivals", [9, 10, 100, 123])
def test_many_archivals_keep_few_files_and_every_entry_once(tmp_path: Path, archivals: int) -> None:
    store = TableStore.at(str(tmp_path))
    for n in range(archivals):
        archived.append(store, archived.entries_file(_entries(n), f"{n:017d}"))
    folder = tmp_path / ARCHIVED_DIR
    assert _read(folder) == Counter(e for n in range(archivals) for e in _entries(n))
    names = [p.name for p in folder.iterdir()]
    assert MERGE_PLAN not in names
    # Merged as one counts in tens: a file per archival of the last ten, per ten of the last
    # hundred, per hundred... (123: 3 + 2 + 1 files; 100: one).
    digits = [int(d) for d in str(archivals)]
    assert len(names) == sum(digits), sorted(names)
    # Each append and each merge takes the next version (one merge per ten files of a
    # tier): a version is never taken twice, and Hudi's readers need no order of them.
    merges = sum(archivals // 10**k for k in range(1, len(digits)))
    assert max(archived.version_of(n) or 0 for n in names) == archivals + merges


def test_a_merge_cut_short_is_finished_by_the_next_archival(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the merged file was written and before the files it merged were
    deleted: a reader meanwhile counts their entries twice (Hudi's own merge may leave
    the same); the next archival deletes them, and each entry is there once again."""
    store = TableStore.at(str(tmp_path))
    folder = tmp_path / ARCHIVED_DIR
    for n in range(MERGE_FILES - 1):
        archived.append(store, archived.entries_file(_entries(n), f"{n:017d}"))
    delete = TableStore.delete

    def crash(self: TableStore, path: str) -> None:
        if ".commits_.archive." in path:
            raise OSError("the process died here")
        delete(self, path)

    with monkeypatch.context() as m:
        m.setattr(TableStore, "delete", crash)
        with pytest.raises(OSError, match="died"):
            archived.append(store, archived.entries_file(_entries(9), f"{9:017d}"))
    assert (folder / MERGE_PLAN).exists()
    assert set(_read(folder).values()) == {2}  # merged, and not yet deleted
    archived.append(store, archived.entries_file(_entries(10), f"{10:017d}"))
    assert _read(folder) == Counter(e for n in range(11) for e in _entries(n))
    assert len(list(folder.iterdir())) == 2  # the merged file and the newest


def test_a_file_with_a_corrupt_block_is_not_merged(tmp_path: Path) -> None:
    """A file a writer left cut short (Hudi on HDFS) stays as it is; the others merge."""
    store = TableStore.at(str(tmp_path))
    folder = tmp_path / ARCHIVED_DIR
    archived.append(store, archived.entries_file(_entries(0), f"{0:017d}"))
    (cut,) = folder.iterdir()
    cut.write_bytes(cut.read_bytes()[:-5])
    for n in range(1, MERGE_FILES + 1):
        archived.append(store, archived.entries_file(_entries(n), f"{n:017d}"))
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [cut.name, archived.file_name(MERGE_FILES + 2)]
    )
    merged = archived.read_entries((folder / archived.file_name(MERGE_FILES + 2)).read_bytes())
    assert Counter(merged) == Counter(e for n in range(1, MERGE_FILES + 1) for e in _entries(n))
