"""Compaction of the metadata table: a file group's slice rewritten as one base file,
beside the writes (Hudi's metadata compaction, which Hudi runs inside a write).

A write appends a log to each metadata file group it changes (``writer.py``); reading a
group merges its base and its logs, so the logs must not pile up, and rewriting a group of
hundreds of thousands of keys takes a good part of a second: inside a write, under the
commit lease, it made that write the slowest of its window, more so as the group grew. So
the rewrite is a service of its own (``services/metadata_compaction.py``), in Hudi's
three steps:

1. ``plan``, under the lease, when no other instant of the table is pending: the slices
   of the groups due (the rule below), each its base and logs as of now. Its instant's
   id comes after every completed delta (the lease orders them), and every delta not
   yet completed will complete after it: its log then belongs to the new slice (Hudi
   1.x slices by completion time). A pending instant that already passed its commit
   point has its delta still to come with an earlier completion time, which the new base
   would miss: so none may be pending (Hudi's metadata compaction waits likewise). The
   slices before the previous rewrite go first (``retire``).
2. ``execute``, without the lease: each planned slice merged and written as a base file
   of the compaction's instant, invisible until it completes (any executor writes the
   same bytes: the plan names every file it reads).
3. ``complete``, in the instant's publish: ``<id>.compaction.requested``, ``.inflight``
   and ``<id>_<completion>.commit`` on the metadata table's timeline, as Hudi completes
   its metadata compaction.

The rule: a group is due once it holds ``MAX_DELTAS`` logs whose records' bytes reach
``LOG_RATIO`` of its base's (a file's bytes less those of a file of one record: the record
schema, twice in a log, is most of a small one, and counted would make a group due every
``MAX_DELTAS`` writes however large its base), or ``SOFT_LOGS`` logs whatever their size.
So a base of many keys is rewritten once per that fraction of it written. The ``files``
group, one small file, is rewritten by the delta that makes it due (``writer.py``); the
``record_index`` groups by this service, one per compaction (the one with the most logs), or as
many as rewrite every group due before the first reaches ``MAX_LOGS`` (any there too):
the groups of partitions written together fall due together. A write itself rewrites a
group that reached ``MAX_LOGS`` (``writer.record``: the service switched off, or behind),
so a reader merges a base and at most ``MAX_LOGS`` logs, at the ten-thousandth instant as
at the tenth.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from dynbucket.format.hudi import lsm_history
from dynbucket.format.hudi.hfile_scan import decoded
from dynbucket.format.metadata import files, records
from dynbucket.format.metadata.files import Changes, Written, arrays
from dynbucket.format.metadata.reader import (
    BASE_NAME,
    FILES,
    LOG_NAME,
    RECORD_INDEX,
    Chunk,
    MetadataTable,
    Slice,
    merge,
    metadata_store,
)
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline.timeline import hudi_instants, next_instant_id

#: Logs a file group's slice takes before it may be rewritten as a base (Hudi:
#: ``hoodie.metadata.compact.max.delta.commits``, 10), once they are ``LOG_RATIO`` of its
#: base's bytes; at ``MAX_LOGS`` logs, whatever their bytes (a write rewrites it then).
MAX_DELTAS = 10
LOG_RATIO = 0.2
MAX_LOGS = 40
#: Logs at which a group is due whatever their bytes, though rewritten in turn (``bounded``):
#: the groups of partitions written together reach it together, and are spread over the
#: ``MAX_LOGS - SOFT_LOGS`` writes before ``MAX_LOGS``.
SOFT_LOGS = 30
#: ``record_index`` groups one compaction rewrites at least, of those due (``bounded``).
REWRITES_PER_INSTANT = 1
#: The commit metadata entries of a metadata compaction: the files it wrote, and the
#: completion time its publish gives the metadata table's instant.
WRITTEN, COMPLETION = "metadata-files", "metadata-completion"

Group = tuple[str, str]
#: The ``files`` partition's one file group.
FILE_GROUP = "files-0000-0"
#: Per table (its store's uri), whether a group was due after this process's latest delta
#: (``note``): the service's look before the lease skips listing the metadata table when
#: it was not. Another process's deltas leave no note here: the look lists then.
_DUE_AFTER_DELTA: dict[str, bool] = caches.per_table({})


def slices(table: MetadataTable, kept: Iterable[str]) -> dict[Group, Slice]:
    """The latest slice of each file group of the metadata partitions ``kept``."""
    return {(p, g): s for p in kept for g, s in table.file_groups(p).items()}


def schema_of(table: MetadataTable, found: Mapping[Group, Slice]) -> str:
    """The record schema the metadata table was written with (Hudi 1.0's is older): a
    reader resolves a slice's blocks to one schema."""
    return table.writer_schema(found.get((FILES, FILE_GROUP))) or records.schema_json()


def due(found: Mapping[Group, Slice], schema: str) -> set[Group]:
    """The ``record_index`` groups of ``found`` the module doc's rule makes due, bounded
    (the ``files`` group, a few kilobytes, is rewritten by the delta that makes it due:
    ``files_due``)."""
    extra = overhead(schema)
    return bounded(
        {k for k, s in found.items() if k[0] == RECORD_INDEX and is_due(s, extra)}, found
    )


def files_due(found: Mapping[Group, Slice], schema: str) -> set[Group]:
    """The ``files`` group, when the rule makes it due: one small file, rewritten by a
    delta itself (a compaction of its own would cost its instant's timeline files)."""
    extra = overhead(schema)
    return {k for k, s in found.items() if k[0] == FILES and is_due(s, extra)}


def note(
    store: TableStore, found: Mapping[Group, Slice], logs: Mapping[Group, int], schema: str
) -> None:
    """Notes whether a group is due now that a delta appended logs of ``logs`` bytes to
    the groups of ``found`` (their slices before it)."""
    grown = dict(found)
    for k, size in logs.items():
        s = found.get(k, Slice(None, ()))
        grown[k] = dataclasses.replace(
            s, logs=(*s.logs, ""), log_sizes=(*s.log_sizes, size), logs_size=s.logs_size + size
        )
    if len(_DUE_AFTER_DELTA) > 1024:
        _DUE_AFTER_DELTA.clear()
    _DUE_AFTER_DELTA[store.uri] = bool(due(grown, schema))


def may_be_due(store: TableStore) -> bool:
    """False when this process's latest delta of the table left no group due (``note``)."""
    return _DUE_AFTER_DELTA.get(store.uri, True)


def is_due(file_slice: Slice, extra: tuple[int, int]) -> bool:
    """The module doc's rule; ``extra``: the bytes of a base and of a log of one record,
    what a file carries whatever its records."""
    logs = len(file_slice.logs)
    if logs >= MAX_LOGS:
        return True
    base = max(0, file_slice.base_size - extra[0]) if file_slice.base else 0
    written = sum(max(0, size - extra[1]) for size in file_slice.log_sizes)
    return logs >= MAX_DELTAS and (written >= LOG_RATIO * base or logs >= SOFT_LOGS)


def bounded(due: set[Group], found: Mapping[Group, Slice]) -> set[Group]:
    """Of the ``record_index`` groups due, those with the most logs, one per compaction or
    as many as rewrite them all before the first reaches ``MAX_LOGS`` (a write adds a log
    to each), and any at ``MAX_LOGS``. The groups of partitions written together fill
    together: rewritten at once, their rewrites add up in one compaction; spread so, each
    pays one or a few, the others waiting their turn."""
    groups = sorted(
        (k for k in due if k[0] == RECORD_INDEX),
        key=lambda k: (-len(found[k].logs), -found[k].logs_size, k),
    )
    most = len(found[groups[0]].logs) if groups else 0
    per_instant = max(REWRITES_PER_INSTANT, -(-len(groups) // max(1, MAX_LOGS - most)))
    return (
        {k for k in due if k[0] != RECORD_INDEX}
        | set(groups[:per_instant])
        | {k for k in groups if len(found[k].logs) >= MAX_LOGS}
    )


@functools.lru_cache(maxsize=8)
def overhead(schema: str) -> tuple[int, int]:
    """The bytes of a base and of a log of one tiny record in ``schema``: the headers and
    the schema every file carries (the rule counts the bytes beyond them)."""
    one = (pa.array([b"k"], pa.binary()), pa.array([b"v"], pa.binary()))
    return (
        len(files.base(RECORD_INDEX, "g", files.INIT_INSTANT, one, schema)[3]),
        len(files.log(RECORD_INDEX, "g", files.INIT_INSTANT, one, schema)[3]),
    )


def merged(
    table: MetadataTable,
    partition: str,
    file_slice: Slice | None,
    changes: Changes,
    schema: str,
) -> Changes:
    """A file group's records as of now (its slice merged), then ``changes`` applied (in
    ``schema``, the metadata table's): keys ascending and their values."""
    ours = Chunk(changes[0], decoded(changes[1]), schema)
    if partition != FILES:  # the record index: a group of many keys, merged as Arrow
        live = merge(
            [*table.merged(partition, file_slice).chunks(), ours] if file_slice else [ours]
        )
        return live.keys, live.values
    listings: dict[str, dict[str, int]] = {}
    slice_records = table.slice_records(partition, file_slice) if file_slice else iter(())
    ours_records = (
        (key.decode(), value, schema)
        for key, value in zip(changes[0].to_pylist(), changes[1].to_pylist(), strict=True)
    )
    for key, value, written in itertools.chain(slice_records, ours_records):
        if value is not None:
            records.merge_listing(listings.setdefault(key, {}), value, written)
    names = sorted(k for k in listings if k != records.ALL_PARTITIONS_KEY)
    out = {k: records.files_record(listings[k], schema_json=schema) for k in names}
    out[records.ALL_PARTITIONS_KEY] = records.all_partitions_record(names, schema_json=schema)
    return arrays(out)


def plan(store: TableStore, kept: Iterable[str]) -> dict[str, Any] | None:
    """Step 1 (module doc), under the lease with no other instant pending: the slices
    before the previous rewrite removed, then the groups due, each its slice's files
    (None: none is due)."""
    kept = tuple(kept)
    retire(metadata_store(store), kept)
    table = MetadataTable(store)
    found = slices(table, kept)
    chosen = due(found, schema_of(table, found))
    if not chosen:
        return None
    return {
        "groups": [
            [p, g, found[(p, g)].base or "", list(found[(p, g)].logs)] for p, g in sorted(chosen)
        ]
    }


def execute(store: TableStore, instant: str, planned: Mapping[str, Any]) -> dict[str, Any]:
    """Step 2 (module doc): each planned slice merged and written as a base file of
    ``instant``; the compaction's commit metadata entries (``complete`` reads them)."""
    mdt = metadata_store(store)
    table = MetadataTable(store)
    schema = schema_of(table, slices(table, (FILES,)))
    out = []
    for partition, group, base, logs in planned.get("groups", []):
        file_slice = Slice(base or None, tuple(logs))
        entries = merged(table, partition, file_slice, arrays({}), schema)
        out.append(files.base(partition, group, instant, entries, schema))
    written = files.write(mdt, out)
    completions = [i.done.partition(".")[0][18:] for i in hudi_instants(mdt) if i.done]
    return {WRITTEN: written, COMPLETION: next_instant_id(max([instant, *completions]))}


def complete(store: TableStore, instant: str, document: Mapping[str, Any]) -> None:
    """Step 3 (module doc): the compaction's instant on the metadata table's timeline
    (once, whoever publishes: the completion time is the document's)."""
    mdt = metadata_store(store)
    completion = str(document[COMPLETION])
    if mdt.exists(mdt.path(files.TIMELINE, f"{instant}_{completion}.commit")):
        return
    written: list[Written] = [tuple(w) for w in document[WRITTEN]]
    files.complete(mdt, instant, written, completion, compaction=True)


def retire(mdt: TableStore, kept: Iterable[str], newest: str | None = None) -> None:
    """Each file group's slices before its previous one removed (a reader that listed the
    previous slice still finds its files); the metadata table's instants before the
    previous rewrite archived (LSM history; a base or log of an archived instant still
    counts: readers take archived instants as completed). ``newest``: the latest rewrite
    (default: the latest base file's instant)."""
    rewrites: set[str] = set()
    bases: dict[tuple[str, str], list[str]] = {}
    listed = {partition: list(mdt.list_files(mdt.path(partition))) for partition in kept}
    for partition, names in listed.items():
        for info in names:
            m = BASE_NAME.match(info.base_name)
            if m is not None and (newest is None or m["instant"] <= newest):
                bases.setdefault((partition, m["file_id"]), []).append(m["instant"])
    for (partition, group), found in bases.items():
        found.sort()
        rewrites.update(found[1:])
        if len(found) < 3:
            continue
        keep_from = found[-2]
        for info in listed[partition]:
            m = BASE_NAME.match(info.base_name) or LOG_NAME.match(info.base_name)
            if m is not None and m["file_id"] == group and m["instant"] < keep_from:
                mdt.delete(info.path)
    latest = newest or max(rewrites, default="")
    previous = sorted(r for r in rewrites if r < latest)
    if not previous:
        return
    old = [i for i in hudi_instants(mdt) if i.done and i.id < previous[-1]]
    if not old:
        return
    lsm_history.append(
        mdt,
        [
            lsm_history.Entry(
                instant=i.id,
                completion=i.done.partition(".")[0][18:] or i.id,
                action=i.action,
                metadata=mdt.read_bytes(mdt.path(files.TIMELINE, i.done)),
            )
            for i in old
        ],
    )
    for i in old:  # the completed file last: a crash in between leaves it whole
        for state in sorted(i.files, key=lambda n: n == i.done):
            mdt.delete(mdt.path(files.TIMELINE, state))
