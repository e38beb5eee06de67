"""A write's logs carried onto the slices a compaction completed while it was written.

Several writers: a write logs onto a group's slice as of its begin. A compaction planned
before the write began (an older instant) may complete before the write commits; its new
base restates the old slice, and the write's log, on that old slice, would be read by no
reader. Its finisher carries the logs of writes committed by then; the write, committing
after, carries its own (under the commit lease, where no other carry runs): the same bytes,
named on the compaction's base with the write's token, the next version of that slice,
and its original removed (never committed: the commit names the copy). A slice that
holds a younger write's log already cannot take the copy after it (readers order logs by
version): the write conflicts, as before.

A compaction younger than the write still conflicts (``timeline/conflicts.py``): a log
older than its slice's base is read by no reader until slices go by completion time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dynbucket.base.errors import WriteConflictError
from dynbucket.format.file_group.slices import DataFile, data_files
from dynbucket.format.file_group.stale import copied_largest
from dynbucket.format.hudi.files import log_name
from dynbucket.format.storage.store import TableStore, WriteBatch
from dynbucket.format.timeline.written import WrittenFile


def carry_logs(
    store: TableStore,
    instant: str,
    files: Sequence[WrittenFile],
    onto: Mapping[tuple[str, str], DataFile],
) -> list[WrittenFile]:
    """``files`` (the write ``instant``'s) with each log of a group in ``onto``
    ((partition, file id) -> the base a compaction completed since) replaced by its copy on
    that base's slice.

    1. Per partition one listing: the next log version of each new slice.
    2. Each log copied (a hard link locally) under its new name, all published at once.
    3. The originals removed: only the copies are committed.
    """
    moved = [f for f in files if f.kind == "log" and (f.partition, f.file_id) in onto]
    if not moved:
        return list(files)
    versions: dict[tuple[str, str], int] = {}
    for partition in dict.fromkeys(f.partition for f in moved):  # 1.
        for g in data_files(store, partition):
            key = (partition, g.file_id)
            base = onto.get(key)
            if base is None or g.kind != "log" or g.base_instant != base.instant:
                continue
            if g.instant > instant:
                # Readers order a slice's logs by version: a copy after a younger write's
                # log would win the ties that younger write wins (Hudi's readers too).
                raise WriteConflictError(
                    f"instant {instant} of {store.uri}: its log in file group {g.file_id} "
                    f"({partition}) cannot go onto the slice compaction {base.instant} made "
                    f"after the log of the younger instant {g.instant}; nothing of it is "
                    "committed (the write runs again from the table as it is)"
                )
            versions[key] = max(versions.get(key, 0), g.version)
    copies: dict[str, WrittenFile] = {}
    with WriteBatch(store) as batch:  # 2.
        for f in sorted(moved, key=lambda f: (f.partition, f.file_id, f.log_version or 0)):
            key = (f.partition, f.file_id)
            base = onto[key]
            versions[key] = version = versions.get(key, 0) + 1
            target = store.path(f.partition, log_name(f.file_id, base.instant, version, instant))
            batch.copy_file(f.path, target)
            copied_largest(f.path, target)
            copies[f.path] = dataclasses.replace(
                f,
                path=target,
                prev_commit=base.instant,
                base_file=base.name,
                log_version=version,
                slice_logs=version,
                base_bytes=base.size,
                log_bytes=f.size,
            )
    for f in moved:  # 3.
        store.delete(f.path)
    return [copies.get(f.path, f) for f in files]
