"""Names of the record-level index's files, under ``.hoodie/.dynbucket/rli/<partition>/``.

* ``<instant>.base.parquet``: a partition's entries as of ``instant`` (written by an index
  compaction, or by the first write of the partition);
* ``<instant>.delta[.<task>].parquet``: the entries one write added; ``<task>`` tells apart
  the files that several writer tasks of one instant write for the same partition;
* ``<instant>.delta.m<first>.parquet``: the entries of the deltas from instant ``first`` to
  before ``instant``, merged by an index compaction of ``instant`` (readers then skip
  those deltas, as they skip the logs a merged log restates).

A partition's index slice is its newest visible base and the visible deltas after it, as a
file group's slice is (``file_group/slices.py``).
"""

from __future__ import annotations

import re

from dynbucket.format.file_group.slices import DataFile
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import RLI_DIR

_INDEX = re.compile(r"^(?P<instant>\d{17})\.(?P<kind>base|delta)(\.(?P<tag>[0-9a-z-]+))?\.parquet$")
_MERGED = re.compile(r"^m(?P<first>\d{17})$")


def index_name(instant: str, kind: str, task: str | None = None) -> str:
    """An index file's name (``kind``: ``base`` or ``delta``; ``task``: the writer task's
    tag when several tasks of one instant write the same partition's deltas)."""
    return f"{instant}.{kind}.{task}.parquet" if task else f"{instant}.{kind}.parquet"


def merged_delta_tag(first: str) -> str:
    """The task tag of a merged delta restating the deltas from instant ``first``."""
    return f"m{first}"


def merged_delta_name(instant: str, first: str) -> str:
    """The name of the merged delta of ``instant`` restating the deltas from ``first``."""
    return index_name(instant, "delta", merged_delta_tag(first))


def index_instant(name: str) -> str | None:
    """The instant that wrote an index file, from its name (None: not an index file)."""
    m = _INDEX.match(name)
    return m["instant"] if m is not None else None


def index_files(store: TableStore, partition: str) -> list[DataFile]:
    """Every index file of a partition, visible or not."""
    out = []
    for info in store.list_files(store.path(RLI_DIR, partition)):
        m = _INDEX.match(info.base_name)
        if m is not None:
            merged = _MERGED.match(m["tag"] or "")
            first = merged["first"] if merged is not None else ""
            size = int(info.size or 0)
            out.append(DataFile(m["instant"], info.path, m["kind"], size, merges_from=first))
    return out
