"""Hudi 1.x's LSM history: archived instants stay readable, in order, while the files and
manifests it keeps stay few, however many archivals (``hudi/lsm_history.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynbucket.format.hudi import lsm_history
from dynbucket.format.hudi.lsm_history import HISTORY_DIR, KEEP_VERSIONS, MERGE_FILES, Entry
from dynbucket.format.storage.store import TableStore


def _entry(n: int) -> Entry:
    instant = f"2026112800{n:07d}"
    return Entry(instant, instant[:-1] + "9", "deltacommit", f"doc {n}".encode(), b"plan")


@pytest.mark.parametrize("archivals", [1, 25, 100])
def test_many_archivals_keep_few_files_and_every_instant(tmp_path: Path, archivals: int) -> None:
    store = TableStore.at(str(tmp_path))
    for n in range(archivals):  # two instants per archival, as archival takes several
        lsm_history.append(store, [_entry(2 * n), _entry(2 * n + 1)])

    assert lsm_history.read(store) == [_entry(n) for n in range(2 * archivals)]
    version = lsm_history.latest_version(store)
    assert version == archivals
    on_disk = sorted(p.name for p in (tmp_path / HISTORY_DIR).iterdir())
    # Manifests: the kept snapshots of the last merge and those after it.
    manifests = {int(n.split("_")[1]) for n in on_disk if n.startswith("manifest_")}
    merged_at = version - version % MERGE_FILES
    oldest = max(1, merged_at - KEEP_VERSIONS + 1) if merged_at else 1
    assert manifests == set(range(oldest, version + 1))
    # The files in force: per layer fewer than MERGE_FILES (25 archivals: 5 of layer 0, 2 of
    # layer 1; 100: one of layer 2), each named by its first and last instant.
    layers = {}
    for f in lsm_history.files_of(store, version):
        first, last, layer = str(f["fileName"]).removesuffix(".parquet").split("_")
        layers[int(layer)] = layers.get(int(layer), 0) + 1
        assert first <= last
    expected = {
        0: archivals % MERGE_FILES,
        1: archivals // MERGE_FILES % MERGE_FILES,
        2: archivals // MERGE_FILES**2,
    }
    assert layers == {k: v for k, v in expected.items() if v}
    # Nothing on disk that the kept snapshots do not name.
    named = {str(f["fileName"]) for v in manifests for f in lsm_history.files_of(store, v)}
    assert {n for n in on_disk if n.endswith(".parquet")} == named
    assert len(on_disk) <= 4 * MERGE_FILES + KEEP_VERSIONS + 1
