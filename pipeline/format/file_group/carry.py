"""A write's logs carried onto the slices a compaction completed while it was written.

Several writers: a write logs onto a group's slice as of its begin. A compaction planned
before the write began (an older instant) may complete before the write commits; its new
base restates the old slice, and the write's log, on that old slice, would be read by no
reader. Its finisher carries the logs of writes committed by then; the write, committing
after, carries its own (under the commit lease, where no other carry runs): the same bytes,
named on the compaction's base with the write's token, the next version of that slice,
and its original removed (never committed: the commit names the copy). A slice that
holds a younger write's log already takes the copy after it only when no key of the two
would merge by their order (Hudi's readers order a slice's logs by version, ours by
instant: they differ only on a key both wrote with the same ordering value, or deleted);
else the write conflicts, as before.

A compaction planned while the write was written (younger than it) left the write's log
out and kept a log version of its slices for it (``services/compaction.py``): its finisher
carries the log if the write committed first; else the write carries it here, at that
version (before the logs of younger writes there, as readers must order them), and keeps
the original on the old slice, which the views before the compaction read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import DELETE, OP
from dynbucket.base.errors import WriteConflictError
from dynbucket.format.file_group.merge import KEY, merge_columns, read_log
from dynbucket.format.file_group.slices import DataFile, data_files
from dynbucket.format.file_group.stale import copied_largest
from dynbucket.format.hudi.files import log_name
from dynbucket.format.storage.store import TableStore, WriteBatch
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.written import WrittenFile


def carry_logs(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    files: Sequence[WrittenFile],
    onto: Mapping[tuple[str, str], DataFile],
    slots: Mapping[tuple[str, str], int] | None = None,
) -> list[WrittenFile]:
    """``files`` (the write ``instant``'s) with each log of a group in ``onto``
    ((partition, file id) -> the base a compaction completed since) replaced by its copy on
    that base's slice; ``slots``: of those, the groups whose compaction kept a version for
    this write (planned while it was written), whose originals stay beside the copies.

    1. Per partition one listing: the next log version of each new slice.
    2. Each log copied (a hard link locally) under its new name, all published at once.
    3. The originals of the other groups removed: only the copies are committed.
    """
    slots = slots or {}
    moved = [f for f in files if f.kind == "log" and (f.partition, f.file_id) in onto]
    if not moved:
        return list(files)
    versions: dict[tuple[str, str], int] = {}
    younger: dict[tuple[str, str], list[DataFile]] = {}
    for partition in dict.fromkeys(f.partition for f in moved):  # 1.
        for g in data_files(store, partition):
            key = (partition, g.file_id)
            base = onto.get(key)
            if base is None or g.base_instant != base.instant:
                continue
            if key in slots:
                if g.kind == "log" and g.version == slots[key]:  # never: kept for this write
                    raise WriteConflictError(
                        f"instant {instant} of {store.uri}: the log version {g.version} "
                        f"compaction {base.instant} kept for it in file group {g.file_id} "
                        f"({partition}) is taken; nothing of it is committed (the write "
                        "runs again from the table as it is)"
                    )
                continue
            if g.kind == "base":  # its versions kept for the writes pending at its planning
                versions[key] = max(versions.get(key, 0), g.version)
                continue
            if g.instant > instant:
                younger.setdefault(key, []).append(g)
            versions[key] = max(versions.get(key, 0), g.version)
    for key, theirs in younger.items():
        mine = [_as_data_file(f, instant) for f in moved if (f.partition, f.file_id) == key]
        if ties := _order_matters(store, spec, mine, theirs):
            # Readers order a slice's logs by version: a copy after a younger write's
            # log would win the ties that younger write wins (Hudi's readers too).
            raise WriteConflictError(
                f"instant {instant} of {store.uri}: its log in file group {key[1]} "
                f"({key[0]}) cannot go onto the slice compaction {onto[key].instant} made "
                f"after the log of the younger instant {theirs[0].instant}, which wrote "
                f"{ties} of its key(s) with the same ordering value or deleted them; "
                "nothing of it is committed (the write runs again from the table as it is)"
            )
    copies: dict[str, WrittenFile] = {}
    with WriteBatch(store) as batch:  # 2.
        for f in sorted(moved, key=lambda f: (f.partition, f.file_id, f.log_version or 0)):
            key = (f.partition, f.file_id)
            base = onto[key]
            if key in slots:
                if key in versions:  # a write logs once a group: never
                    raise WriteConflictError(
                        f"instant {instant} of {store.uri}: two logs in file group "
                        f"{f.file_id} ({f.partition}) for the one version compaction "
                        f"{base.instant} kept for it; nothing of it is committed"
                    )
                versions[key] = version = slots[key]
            else:
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
    out: list[WrittenFile] = []
    for f in files:  # 3.
        if f.path not in copies:
            out.append(f)
        elif (f.partition, f.file_id) in slots:  # the views before the compaction read it
            out += [f, copies[f.path]]
        else:
            store.delete(f.path)
            out.append(copies[f.path])
    return out


def _as_data_file(f: WrittenFile, instant: str) -> DataFile:
    return DataFile(instant, f.path, "log", f.size, f.file_id)


def _order_matters(
    store: TableStore, spec: TableSpec, mine: Sequence[DataFile], theirs: Sequence[DataFile]
) -> int:
    """How many keys both ``mine`` and ``theirs`` (logs of one group) wrote where the order
    of the logs decides the merge: the same ordering value (any, without an ordering
    field), or a delete on either side."""
    ordering = [spec.ordering_field] if spec.ordering_field else []

    def records(files: Sequence[DataFile]) -> pa.Table:
        return pa.concat_tables(
            [
                read_log(store, spec, f, merge_columns(spec, ordering)).select([KEY, OP, *ordering])
                for f in files
            ]
        )

    a, b = records(mine), records(theirs)
    both = a.join(b, KEY, join_type="inner", left_suffix="_a", right_suffix="_b")
    if not both.num_rows:
        return 0
    order = pc.or_(pc.equal(both[f"{OP}_a"], DELETE), pc.equal(both[f"{OP}_b"], DELETE))
    if ordering:
        same = pc.equal(both[f"{ordering[0]}_a"], both[f"{ordering[0]}_b"])
        order = pc.or_(order, pc.fill_null(same, True))
    else:
        order = pc.or_(order, pa.scalar(True))
    return int(pc.sum(order).as_py() or 0)
