"""Snapshot reads: the table as of a completed instant.

A snapshot is fixed at creation: the set of completed instants it sees. It lists the
partitions' data files once (checking that every file a visible commit lists is there),
keeps each group's latest visible slice, merges slices (in threads here; an engine such as
Spark runs :func:`read_ref` per slice in its tasks) and adds the meta columns
``_partition``, ``_bucket``, ``_file_id`` and ``_instant`` (the commit that last wrote the
row). Key lookups go through the record-level index and open only the keys' groups.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dynbucket.base.beside import in_threads
from dynbucket.base.columns import BUCKET, FILE_ID, HASH, INSTANT, PARTITION
from dynbucket.base.errors import DynBucketError, InstantNotFoundError, TableCorruptedError
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group import adopted
from dynbucket.format.file_group.merge import (
    fill_meta,
    in_files,
    merge_columns,
    merge_slice,
    read_deltas,
    read_slice,
    read_slice_of_keys,
)
from dynbucket.format.file_group.slices import DataFile, FileSlice, file_slices, parsed_data_files
from dynbucket.format.hudi.instant_files import HUDI_ACTIONS
from dynbucket.format.hudi.meta_fields import COMMIT_TIME
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.read import by_metadata, filters
from dynbucket.format.read.slice_rows import SliceRef, decorate
from dynbucket.format.records.incoming import prepare
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR
from dynbucket.format.table.schemas import schema_as_of
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Timeline, visible_of

T = TypeVar("T")
#: Reads of one snapshot that a clean beside them may cut short before it gives up.
_READ_TRIES = 4


#: What a refused lookup's error says came of it.
_NOTHING_LOOKED_UP = (
    "Nothing was looked up (a key to look up is its key fields, and its partition fields "
    "unless the index is global)"
)


class Snapshot:
    """The table as of one completed instant.

    Raises:
        InstantNotFoundError: ``as_of`` is not a completed instant, or was cleaned.
        TableCorruptedError: a file a completed instant lists is missing.
    """

    def __init__(self, store: TableStore, spec: TableSpec, as_of: str | None = None) -> None:
        self.store = store
        self.defined = spec
        """The table's definition; ``spec`` is it with the schema as of the view."""
        self.spec = spec
        self.adopted = adopted.load(store)
        self.instant: str | None = None
        self._take(as_of, first=True)

    def _take(self, as_of: str | None, first: bool = False) -> None:
        """Takes the view of ``as_of`` (None: the latest completed instant) as the timeline
        is now: the completed instants up to it, and what cleans retain."""
        self.timeline = timeline = Timeline(self.store, self.spec.options.merge_on_read)
        store = self.store
        # Cleans first: one scheduled after this is new to the view (``_cleaned_since``).
        self._cleans = timeline.own_ids(Action.CLEAN)
        completed = timeline.completed()
        archived = timeline.archived()
        if as_of is not None and as_of <= archived.floor:
            raise InstantNotFoundError(
                f"instant {as_of} of {store.uri} was archived (the active timeline starts "
                f"after {archived.floor}); read a later instant, or keep more instants "
                "active (hoodie.keep.min.commits)"
            )
        if as_of is not None and as_of not in {i.id for i in completed}:
            raise InstantNotFoundError(
                f"no completed instant {as_of} in {store.uri}; completed: "
                f"{[i.id for i in completed][-5:]} (last five)"
            )
        self.instant = as_of or (completed[-1].id if completed else None)
        cleaned = [
            timeline.metadata(i).get("earliest-retained")
            for i in completed
            if i.action == Action.CLEAN
        ]
        cleaned.append(archived.earliest_retained)
        self.earliest_retained: str | None = max((c for c in cleaned if c), default=None)
        if (
            as_of is not None
            and self.earliest_retained is not None
            and as_of < self.earliest_retained
        ):
            raise InstantNotFoundError(
                f"instant {as_of} was cleaned: the table keeps file slices from "
                f"{self.earliest_retained} on (cleaner.commits-retained)"
            )
        self.visible = visible_of(completed, self.instant or "", archived)
        self.spec = schema_as_of(store, self.defined, self.visible)
        if first:
            self.seen = completed[-1].id if completed else None
            """The newest completed instant (of any action) when the snapshot was taken."""
        self._completed = completed
        self._slices: list[SliceRef] | None = None
        self._listed: dict[str, list[SliceRef]] = {}

    # --- staying whole while services run beside -------------------------------------------

    def _cleaned_since(self) -> bool:
        """Whether a clean was scheduled since this view was taken. Only such a clean can
        remove a file this view reads: it may keep a slice that a compaction (or a log or
        index compaction) completed since supersedes, one this view does not see (one
        scheduled before, pending or done, planned from instants this view sees)."""
        return bool(self.timeline.own_ids(Action.CLEAN) - self._cleans)

    def consistent(self, read: Callable[[], T]) -> T:
        """``read()`` of this snapshot's files, whole: when a clean scheduled since the
        view was taken may have removed what it read, the view of the same instant is taken
        again (it now sees the services completed meanwhile, which change no row) and the
        read runs again.

        Raises:
            InstantNotFoundError: the instant is no longer retained (or the read lost the
                race ``_READ_TRIES`` times: read again).
            TableCorruptedError: a file is missing that no clean explains.
        """
        error: BaseException | None = None
        for _ in range(_READ_TRIES):
            try:
                out = read()
            except (FileNotFoundError, TableCorruptedError) as e:
                if not self._cleaned_since():
                    raise missing_file(self.store, self.instant, self.seen, e) from e
                error = e
            else:
                if not self._cleaned_since():
                    return out
            try:
                self._take(self.instant)
            except InstantNotFoundError as e:  # the clean no longer retains the instant
                raise missing_file(self.store, self.instant, self.seen, error or e) from e
        raise InstantNotFoundError(
            f"instant {self.instant} of {self.store.uri}: cleans beside this read removed "
            f"files it read {_READ_TRIES} times ({error}); read the table again"
        )

    # --- file slices ---------------------------------------------------------------------

    def slices(self, partitions: Sequence[str] | None = None) -> list[SliceRef]:
        """Latest visible slice of every file group (of ``partitions`` when given).

        Asked for some partitions, the snapshot lists only their folders (a write touches a
        few partitions: on an object store a walk of the whole table would cost a listing
        request per thousand files of it); asked for all, it walks the table once.
        """
        if self._slices is None and partitions is not None:
            refs = []
            for p in sorted(set(partitions)):
                if p not in self._listed:
                    self._listed[p] = self._slices_of(
                        {
                            p: parsed_data_files(
                                self.store.list_files(self.store.path(p)), self.adopted
                            )
                        }
                    )
                refs += self._listed[p]
            return refs
        if self._slices is None:
            by_partition: dict[str, list[DataFile]] = {}
            hoodie = self.store.path(HOODIE_DIR)
            for info in self.store.walk(self.store.root):
                if info.path.startswith(hoodie + "/"):
                    continue
                partition = os.path.dirname(info.path)[len(self.store.root) :].strip("/")
                by_partition.setdefault(partition, []).extend(
                    parsed_data_files([info], self.adopted)
                )
            self._slices = self._slices_of(by_partition, whole=True)
        wanted = None if partitions is None else set(partitions)
        return [r for r in self._slices if wanted is None or r.partition in wanted]

    def _slices_of(
        self, by_partition: dict[str, list[DataFile]], whole: bool = False
    ) -> list[SliceRef]:
        self._check_listed(by_partition, whole)
        return [
            SliceRef(p, s)
            for p in sorted(by_partition)
            for s in file_slices(by_partition[p], self.visible)
        ]

    def _check_listed(self, by_partition: dict[str, list[DataFile]], whole: bool) -> None:
        """Every data file a visible commit lists (in the listed partitions, unless
        ``whole``) is on storage (files of instants before the last clean's horizon may have
        been cleaned)."""
        present = {f.path for files in by_partition.values() for f in files}
        folders = {self.store.path(p) for p in by_partition}
        missing = []
        for instant in self._completed:
            if instant.action not in HUDI_ACTIONS or instant.id not in self.visible:
                continue
            if self.earliest_retained is not None and instant.id < self.earliest_retained:
                continue
            for f in self.timeline.metadata(instant)["files"]:
                if f["kind"] != "data" or f["path"] in present:
                    continue
                if whole or posixpath.dirname(f["path"]) in folders:
                    missing.append((instant.id, f["path"]))
        if missing:
            # Read once, after the listing: a clean that removed any of them is on it (one
            # read a missing file listed the timeline twice each: 236 times in the
            # compaction plans of 48 writes).
            horizon = cleaning_horizon(self.timeline)
            for instant_id, path in missing:
                self._missing(instant_id, path, horizon)

    def _missing(self, instant: str, path: str, horizon: Horizon | None) -> None:
        """A listed file of a visible commit is not there: a clean that ran since this
        snapshot was taken removed it (nothing this snapshot reads, when the snapshot is at
        or after the clean's horizon, read after the listing; else the snapshot is gone),
        or the table lost it."""
        lost = TableCorruptedError(
            f"{path}: a data file of completed instant {instant} is missing; restore it from "
            "a backup (reading on would lose its rows)"
        )
        if horizon is None or instant >= horizon.earliest:
            raise lost
        if self.instant is not None and self.instant < horizon.earliest:
            raise horizon.gone(self.instant, lost)
        # Superseded by a base file at or before the horizon, which the clean kept.

    def partitions(self) -> list[str]:
        return sorted({r.partition for r in self.slices()})

    def bucket_files(self, partition: str) -> dict[int, FileSlice]:
        """bucket id -> its file group's slice, in one partition."""
        return {r.slice.bucket: r.slice for r in self.slices([partition])}

    # --- reading -------------------------------------------------------------------------

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        partitions: Sequence[str] | None = None,
        read_optimized: bool = False,
        refs: Sequence[SliceRef] | None = None,
        filter: pc.Expression | None = None,  # noqa: A002 (the name readers know)
    ) -> pa.Table:
        """The snapshot's live rows (all partitions, or ``partitions``; or the slices
        ``refs`` of it); with ``filter``, those it keeps (``filters.py``: partitions and row
        groups that cannot match are not read).

        Slices that are a base file alone are one multi-threaded dataset scan; slices with
        logs are merged in a thread pool. ``read_optimized``: the base files alone, as
        Hudi's read-optimized queries read a merge-on-read table (logs not merged).
        """
        if filter is not None:
            filters.check(self.spec, filter)
        if refs is not None:  # slices of a view the caller holds: one try
            try:
                return self._to_arrow(columns, meta_columns, list(refs), read_optimized, filter)
            except (FileNotFoundError, TableCorruptedError) as e:
                raise missing_file(self.store, self.instant, self.seen, e) from e
        return self.consistent(
            lambda: self._to_arrow(
                columns, meta_columns, self.slices(partitions), read_optimized, filter
            )
        )

    def _to_arrow(
        self,
        columns: Sequence[str] | None,
        meta_columns: bool,
        refs: list[SliceRef],
        read_optimized: bool,
        filter: pc.Expression | None = None,  # noqa: A002
    ) -> pa.Table:
        schema = self.output_schema(columns, meta_columns)
        if read_optimized:
            refs = [
                SliceRef(r.partition, FileSlice(r.slice.file_id, r.slice.base))
                for r in refs
                if r.slice.base is not None
            ]
        spec, store = self.spec, self.store
        if filter is not None:  # 1. of filters.py
            kept = set(
                filters.matching_partitions(spec, sorted({r.partition for r in refs}), filter)
            )
            refs = [r for r in refs if r.partition in kept]
        if not refs:
            return schema.empty_table()
        wanted = list(columns) if columns is not None else spec.schema.names
        # A merged slice is filtered after its merge (3. of filters.py): every field read.
        merged_wanted = wanted if filter is None else _unique([*wanted, *spec.schema.names])
        meta = [COMMIT_TIME] if meta_columns else []
        out_cols = _unique([n for n in wanted if n not in spec.path_fields] + meta)
        merged_cols = _unique([n for n in merged_wanted if n not in spec.path_fields] + meta)
        needed = merge_columns(spec, out_cols)
        merged_needed = merge_columns(spec, merged_cols)
        merged = [r for r in refs if r.slice.logs]
        workers = os.cpu_count() or 2
        with ThreadPoolExecutor(max_workers=workers + 1) as pool:
            # Logs are read in the pool while one multi-threaded scan reads every base file:
            # slices without logs are done as their batches come; the others are merged.
            def read_logs(ref: SliceRef) -> list[pa.Table]:
                return read_deltas(store, spec, ref.slice.logs, merged_needed)

            logs = {id(r): pool.submit(read_logs, r) for r in merged}
            parts: list[pa.Table] = []
            bases: dict[int, list[pa.Table]] = {id(r): [] for r in merged}
            # One scan of every base file; with a filter, the base files read alone apart
            # (2. of filters.py: the filter pushed down) from those merged with logs.
            # A filter on fields stored in another type than the table's is applied after.
            pushed = filter if filter is not None and filters.pushable(spec) else None
            scans = [(refs, needed, None)]
            if filter is not None:
                alone = [r for r in refs if not r.slice.logs]
                read = needed if pushed is not None else merged_needed
                scans = [(alone, read, pushed), (merged, merged_needed, None)]
            for scanned, columns_read, pushdown in scans:
                for ref, rows in _scan(store, spec, scanned, columns_read, pushdown):
                    if ref.slice.logs:
                        bases[id(ref)].append(rows)
                    elif filter is not None and pushed is None:
                        rows = decorate(spec, ref, rows, merged_wanted, meta_columns)
                        parts.append(rows.filter(filter))
                    else:
                        parts.append(decorate(spec, ref, rows, wanted, meta_columns))

            def finish(ref: SliceRef) -> pa.Table:
                base = pa.concat_tables(bases[id(ref)]) if bases[id(ref)] else None
                rows = merge_slice(spec, base, logs[id(ref)].result(), merged_cols)
                rows = decorate(spec, ref, rows, merged_wanted, meta_columns)
                if filter is not None:  # 3. of filters.py
                    rows = rows.filter(filter)
                return rows

            parts += list(pool.map(finish, merged))
        if not parts:
            return schema.empty_table()
        return pa.concat_tables([p.select(schema.names).cast(schema) for p in parts])

    def lookup(self, keys: pa.Table, meta_columns: bool = True) -> pa.Table:
        """Live rows of the given keys (key fields, plus partition fields when partitioned).

        Each key is found through the record-level index (as of the newest instant,
        through Hudi's metadata table's record index when the table keeps one), and of its
        file group only the row groups of the base file that can hold it are read, and its
        logs. With a global index the key alone finds the row (a
        partition value given is ignored).
        """
        wanted = prepare(self.spec, keys, deletes=True, done=_NOTHING_LOOKED_UP)
        return self.consistent(lambda: self._lookup(wanted, meta_columns))

    def _lookup(self, wanted: pa.Table, meta_columns: bool) -> pa.Table:
        spec = self.spec
        # Hudi's record index answers as of the newest instant (``by_metadata.py``).
        found = (
            by_metadata.lookup(self, wanted, meta_columns) if by_metadata.answers(self) else None
        )
        if found is not None:
            return (
                pa.concat_tables(found)
                if found
                else self.output_schema(None, meta_columns).empty_table()
            )
        index = RecordLevelIndex(self.store, spec)
        layouts = spec.scheme.layouts(self.store, spec.record_key, self.visible)
        out = []
        named = pc.unique(wanted.column(PARTITION)).to_pylist()
        where = spec.scheme.lookup_partitions(named, index.partitions)
        scoped = not spec.scheme.keys_move  # else a key's row may be in any partition asked
        for partition in where:
            mine = (
                wanted.filter(pc.equal(wanted.column(PARTITION), partition)) if scoped else wanted
            )
            if layouts is not None:  # computed from the key, else found in the index
                buckets = layouts.locate(partition, mine)
            else:
                hashes = mine.column(HASH).to_numpy()
                entries = index.lookup(partition, hashes, self.visible, [BUCKET])
                buckets = entries.column(BUCKET).to_numpy()
            slices = self.bucket_files(partition)
            for bucket in np.unique(buckets).tolist():
                fslice = slices.get(bucket)
                if fslice is None:
                    continue
                keys = mine.select(list(spec.record_key))
                rows = read_slice_of_keys(self.store, spec, fslice, keys, spec.schema.names)
                ref = SliceRef(partition, fslice)
                out.append(decorate(spec, ref, rows, spec.schema.names, meta_columns))
        if not out:
            return self.output_schema(None, meta_columns).empty_table()
        return pa.concat_tables(out)

    def layouts(self) -> BucketLayouts:
        """The bucket layout of every partition as of this snapshot (stateless schemes)."""
        return BucketLayouts.load(
            self.store, self.spec.bucket_options, self.spec.record_key, self.visible
        )

    def stats(self) -> pa.Table:
        """Per partition and bucket: keys, bytes and files of its slice. Keys are index
        entries (dynamic buckets) or the slice's live keys (stateless schemes, which also
        say each partition's ``num_buckets`` or each bucket's ring range, and leave out
        buckets their layout retired)."""
        if not self.spec.scheme.index_entries:
            return self._layout_stats()
        index = RecordLevelIndex(self.store, self.spec)
        rows = []
        for partition in self.partitions():
            entries = index.record_index_locations(partition, self.visible, [BUCKET])
            keys = (
                np.bincount(entries.column(BUCKET).to_numpy())
                if entries.num_rows
                else np.zeros(0, np.int64)
            )
            for bucket, fslice in self.bucket_files(partition).items():
                rows.append(
                    {
                        "partition": partition,
                        "bucket": bucket,
                        FILE_ID: fslice.file_id,
                        "keys": int(keys[bucket]) if bucket < len(keys) else 0,
                        "bytes": fslice.size,
                        "files": len(fslice.files),
                    }
                )
        return _stats_table(rows)

    def _layout_stats(self) -> pa.Table:
        layouts = self.layouts()
        keys = list(self.spec.record_key)

        def one(ref: SliceRef) -> dict[str, Any] | None:
            partition, fslice = ref.partition, ref.slice
            if fslice.bucket not in layouts.buckets(partition):
                return None
            live = read_slice(self.store, self.spec, fslice, keys)
            return {
                "partition": partition,
                "bucket": fslice.bucket,
                FILE_ID: fslice.file_id,
                "keys": live.num_rows,
                "bytes": fslice.size,
                "files": len(fslice.files),
                **layouts.facts(partition, fslice.bucket),
            }

        found = in_threads(one, [(s,) for s in self.slices()], os.cpu_count() or 1)
        return _stats_table([r for r in found if r is not None])

    def output_schema(self, columns: Sequence[str] | None, meta_columns: bool) -> pa.Schema:
        return self.output_schema_of(self.spec, columns, meta_columns)

    @staticmethod
    def output_schema_of(
        spec: TableSpec, columns: Sequence[str] | None, meta_columns: bool
    ) -> pa.Schema:
        """The schema of what reads return: ``columns`` (all fields by default), then the
        meta columns."""
        names = list(columns) if columns is not None else spec.schema.names
        fields = [spec.schema.field(n) for n in names]
        if meta_columns:
            fields += [
                pa.field(PARTITION, pa.string()),
                pa.field(BUCKET, pa.int32()),
                pa.field(FILE_ID, pa.string()),
                pa.field(INSTANT, pa.string()),
            ]
        return pa.schema(fields)


def _stats_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Stats rows as a table (no bucket yet: the two key columns, empty)."""
    if rows:
        return pa.Table.from_pylist(rows)
    return pa.table({"partition": pa.array([], pa.string()), "bucket": pa.array([], pa.int64())})


def _scan(
    store: TableStore,
    spec: TableSpec,
    refs: Sequence[SliceRef],
    columns: Sequence[str],
    filter: pc.Expression | None = None,  # noqa: A002
) -> Iterator[tuple[SliceRef, pa.Table]]:
    """Batches of every base file of ``refs`` in one multi-threaded dataset scan, each with
    its slice (meta fields the files do not hold are filled in); ``filter`` pushed down
    (2. of ``filters.py``)."""
    by_path = {r.slice.base.path: r for r in refs if r.slice.base is not None}
    if not by_path:
        return
    try:
        # The files' schema is the table's as of the view: a file written before a field
        # was added reads it as nulls, one before a promotion in its old type, cast.
        wanted = in_files(spec, columns)
        if filter is None:
            schema = pa.schema([f for f in spec.file_schema() if f.name in wanted])
            dataset = pads.dataset(list(by_path), schema, format="parquet", filesystem=store.fs)
        else:  # every field the filter may name; the paths answer the partition fields
            dataset = pads.FileSystemDataset.from_paths(
                list(by_path),
                schema=spec.file_schema(),
                format=pads.ParquetFileFormat(),
                filesystem=store.fs,
                partitions=[filters.guarantee(spec, r.partition) for r in by_path.values()],
            )
        batches = dataset.scanner(columns=wanted, filter=filter).scan_batches()
        for tagged in batches:
            batch = tagged.record_batch
            if batch.num_rows:
                ref = by_path[tagged.fragment.path]
                assert ref.slice.base is not None
                rows = pa.Table.from_batches([batch])
                rows = fill_meta(spec, rows, columns, ref.slice.base.instant, ref.slice.base.name)
                yield ref, spec.as_table_types(rows)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise TableCorruptedError(f"unreadable data file ({e}); restore it from a backup") from e


def read_ref(
    store: TableStore,
    spec: TableSpec,
    ref: SliceRef,
    columns: Sequence[str] | None,
    meta_columns: bool,
    snapshot: tuple[str | None, str | None] = (None, None),
) -> pa.Table:
    """One slice's live rows with (optionally) the meta columns; ``snapshot`` is the
    snapshot's (instant, seen), to tell a file cleaning removed from a lost one."""
    wanted = list(columns) if columns is not None else spec.schema.names
    data = [n for n in wanted if n not in spec.path_fields]
    try:
        rows = read_slice(store, spec, ref.slice, data, (COMMIT_TIME,) if meta_columns else ())
    except (FileNotFoundError, TableCorruptedError) as e:
        raise missing_file(store, *snapshot, e) from e
    return decorate(spec, ref, rows, wanted, meta_columns)


def missing_file(
    store: TableStore, instant: str | None, seen: str | None, error: BaseException
) -> DynBucketError:
    """What a file a snapshot lists but cannot read means: when a clean that runs now or
    has run no longer retains the snapshot's ``instant``, the snapshot is gone
    (:class:`InstantNotFoundError`); otherwise the table lost a file
    (:class:`TableCorruptedError` naming it). A clean's horizon decides; a clean scheduled
    after the snapshot was taken (after ``seen``) may have removed what a service completed
    since supersedes: read again (:class:`InstantNotFoundError`)."""
    timeline = Timeline(store)
    horizon = cleaning_horizon(timeline)
    if instant is not None and horizon is not None and instant < horizon.earliest:
        return horizon.gone(instant, error)
    later = sorted(c for c in timeline.own_ids(Action.CLEAN) if seen is None or c > seen)
    if later:
        return InstantNotFoundError(
            f"clean {later[-1]}, scheduled after this read's snapshot of instant {instant} was "
            f"taken, removed files it read ({error}): they are superseded by a compaction "
            "completed since. Read the table again"
        )
    if isinstance(error, TableCorruptedError):
        return error
    return TableCorruptedError(
        f"{error}: a data file of completed instant(s) up to {instant} is missing; restore "
        "it from a backup (reading on would lose its rows)"
    )


@dataclass(frozen=True)
class Horizon:
    """The newest cleaning horizon: file slices before ``earliest`` may be gone."""

    clean: str
    earliest: str
    running: bool

    def gone(self, instant: str, error: BaseException) -> InstantNotFoundError:
        when = "running while this read ran" if self.running else "which ran while this read did"
        return InstantNotFoundError(
            f"instant {instant} is no longer retained: clean {self.clean}, {when}, keeps file "
            f"slices from {self.earliest} on and removed files this read needed ({error}); "
            "read the table again (its latest instant), or retain more instants "
            "(cleaner.commits-retained)"
        )


def cleaning_horizon(timeline: Timeline) -> Horizon | None:
    """The largest ``earliest-retained`` of the running cleans (from their plans, which they
    record before removing a file) and the completed ones. Running cleans are read first:
    one that completes in between is then among the completed."""
    found: list[Horizon] = []
    for clean in [i for i in timeline.pending() if i.action == Action.CLEAN]:
        earliest = timeline.plan(clean).get("earliest-retained")
        if earliest:
            found.append(Horizon(clean.id, earliest, True))
    for clean in reversed(timeline.completed(Action.CLEAN)):
        earliest = timeline.metadata(clean).get("earliest-retained")
        if earliest:
            found.append(Horizon(clean.id, earliest, False))
            break  # horizons only grow: the newest completed clean's is the largest
    return max(found, key=lambda h: h.earliest, default=None)


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))
