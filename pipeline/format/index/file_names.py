"""Names of the record-level index's files, under ``.hoodie/.dynbucket/rli/<partition>/``.

* ``<instant>.base.parquet``: a partition's entries as of ``instant`` (written by an index
  compaction, or by the first write of the partition);
* ``<instant>.delta[.<task>].parquet``: the entries one write added; ``<task>`` tells apart
  the files that several writer tasks of one instant write for the same partition;
* ``<instant>.delta.m<first>.parquet``: the entries of the deltas from instant ``first`` to
  before ``instant``, merged by an index compaction of ``instant`` (readers then skip
  those deltas, as they skip the logs a merged log restates);
* ``<instant>.base.u<until>.parquet`` and ``<instant>.delta.m<first>-<until>.parquet``: an
  index compaction planned while writes were pending restates only the instants before
  ``until``, the oldest of them: their deltas, written later, stay in the slice after it,
  so a write is not run again for an index compaction that began after it.

A partition's index slice is its newest visible base and the visible deltas after it (from
its ``until``), as a file group's slice is (``file_group/slices.py``).
"""

from __future__ import annotations

import re

from dynbucket.format.file_group.slices import DataFile
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import RLI_DIR

_INDEX = re.compile(r"^(?P<instant>\d{17})\.(?P<kind>base|delta)(\.(?P<tag>[0-9a-z-]+))?\.parquet$")
_MERGED = re.compile(r"^m(?P<first>\d{17})(-(?P<until>\d{17}))?$")
_UNTIL = re.compile(r"^u(?P<until>\d{17})$")


def index_name(instant: str, kind: str, task: str | None = None) -> str:
    """An index file's name (``kind``: ``base`` or ``delta``; ``task``: the writer task's
    tag when several tasks of one instant write the same partition's deltas)."""
    return f"{instant}.{kind}.{task}.parquet" if task else f"{instant}.{kind}.parquet"


def merged_delta_tag(first: str, until: str = "") -> str:
    """The task tag of a merged delta restating the deltas from instant ``first`` (to
    before ``until``; "": to before its own instant)."""
    return f"m{first}-{until}" if until else f"m{first}"


def merged_delta_name(instant: str, first: str, until: str = "") -> str:
    """The name of the merged delta of ``instant`` restating the deltas from ``first`` (to
    before ``until``)."""
    return index_name(instant, "delta", merged_delta_tag(first, until))


def base_tag(until: str) -> str | None:
    """The tag of a base restating the instants before ``until`` only ("": all before its
    own instant, no tag)."""
    return f"u{until}" if until else None


def index_instant(name: str) -> str | None:
    """The instant that wrote an index file, from its name (None: not an index file)."""
    m = _INDEX.match(name)
    return m["instant"] if m is not None else None


def index_file(path: str, size: int) -> DataFile | None:
    """The index file at ``path`` (None: its name is no index file's)."""
    m = _INDEX.match(path.rsplit("/", 1)[-1])
    if m is None:
        return None
    tag = m["tag"] or ""
    merged, based = _MERGED.match(tag), _UNTIL.match(tag)
    first = merged["first"] if merged is not None else ""
    until = (merged["until"] or "") if merged is not None else ""
    until = based["until"] if based is not None else until
    return DataFile(m["instant"], path, m["kind"], size, merges_from=first, until=until)


def index_files(store: TableStore, partition: str) -> list[DataFile]:
    """Every index file of a partition, visible or not."""
    found = (
        index_file(i.path, int(i.size or 0))
        for i in store.list_files(store.path(RLI_DIR, partition))
    )
    return [f for f in found if f is not None]
