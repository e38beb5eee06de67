"""The partitioned record-level index (RLI): per data partition, key -> bucket of live keys.

Under ``.hoodie/.dynbucket/rli/<partition path>/``: one ``<instant>.delta.parquet`` per commit that
inserted or deleted keys of the partition, ``<instant>.base.parquet`` when index compaction
merged them all, and ``<instant>.delta.m<first>.parquet`` when it merged a run of the newest
deltas only (``files.py``). Entries (record key fields, ``_hash``, ``_bucket``,
``_file_id``, ``_instant``, ``_op``) are written in the same instant as the data they index
(I6) and never change afterwards: an insert entry (``_op`` upsert) when a key is new, a
tombstone (``_op`` delete, naming the bucket the key leaves) when a delete removes it. A
key's newest entry says where it is (:func:`live`): a deleted key is in no bucket, its room
is free, and it comes back as a new key. A file written before tombstones has no ``_op``
column: all its entries are inserts. Index compaction writes a base of live entries only.

Each file is grouped by assigner slot (``pmod(_hash, slots)``, the slot count of the write
that made it) and sorted by ``_hash`` within a slot; its footer says the slot count, the
entries of each slot and of each bucket. A slot's cache bootstraps from its own section of
each file, already sorted, and counts every slot's live keys per bucket from the footers
(inserts less tombstones): it reads about ``1 / gcd(slots then, slots now)`` of the
partition's index, not all of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.base.columns import BUCKET, DELETE, FILE_ID, HASH, INSTANT, OP
from dynbucket.base.keyhash import slot_of
from dynbucket.format.file_group.slices import DataFile, latest_slice
from dynbucket.format.index.entries import conform, live, with_op
from dynbucket.format.index.file_names import (
    base_tag,
    index_file,
    index_files,
    index_name,
    merged_delta_tag,
)
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import FileWriter, TableStore
from dynbucket.format.table.paths import RLI_DIR
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Visible

#: Rows per Parquet row group: small enough that a point lookup decodes little (it reads
#: the one row group of each file whose hash range, inside the key's slot section, holds
#: the key: 16K rows took 3.6-3.9 ms over a partition's 15 files where 64K took 4.6-5.0),
#: large enough that a slot's bootstrap, which reads its whole section, is not slowed.
ROW_GROUP = 16 * 1024

#: Footer keys of an index file: the slot count its entries are grouped by, the entries of
#: each slot (comma-separated), the live keys each bucket gains (``bucket:count`` pairs:
#: inserts less tombstones, negative where more left than came), and its tombstones; a
#: merged file (an index compaction's base or merged delta) also the instants of the files
#: it restates (comma-separated), so that a cache holding all of them takes it as seen
#: instead of loading the partition again (``RecordLevelIndex.slot_catch_up``).
SLOTS_KEY = b"dynbucket.index.slots"
SLOT_ROWS_KEY = b"dynbucket.index.slot-rows"
BUCKET_ROWS_KEY = b"dynbucket.index.bucket-rows"
TOMBSTONES_KEY = b"dynbucket.index.tombstones"
RESTATES_KEY = b"dynbucket.index.restates"


@dataclass(frozen=True)
class SlotSlice:
    """What one slot reads of a partition's index (:meth:`RecordLevelIndex.slot_slice`)."""

    runs: list[pa.Table]
    """This slot's live entries, in runs each sorted by hash, disjoint."""
    bucket_keys: npt.NDArray[np.int64]
    """Live keys per bucket id, counting every slot's (from the footers)."""
    entries_read: int
    """Entries read from storage (this slot's, and neighbours' sharing a row group)."""
    entries_total: int
    """Entries the partition's index holds."""
    instants: frozenset[str] = frozenset()
    """The instants of the files read (what a cache of them holds: ``PartitionLoad.seen``)."""


class RecordLevelIndex:
    """Reads and writes one table's partitioned record-level index."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.schema = spec.index_schema()

    def dir(self, partition: str) -> str:
        return self.store.path(RLI_DIR, partition)

    # --- writing -------------------------------------------------------------------------

    def write(
        self,
        partition: str,
        instant: str,
        entries: pa.Table,
        kind: str = "delta",
        task: str | None = None,
        files: FileWriter | None = None,
        slots: int = 1,
        restates: Sequence[str] = (),
    ) -> DataFile:
        """Writes a partition's new entries of ``instant``, grouped by slot of ``slots`` and
        sorted by hash within (``task``: which writer task, when several write the same
        partition in one instant; ``files``: a batch to write it with, else it is
        published at once; ``restates``: a merged file's, the instants of the files it
        merged, ``RESTATES_KEY``)."""
        entries = conform(entries, self.schema)
        hashes = entries.column(HASH).to_numpy()
        slot = slot_of(hashes, slots)
        entries = entries.take(pa.array(np.lexsort((hashes, slot))))
        gone = entries.column(OP).to_numpy() == DELETE
        net = np.bincount(entries.column(BUCKET).to_numpy(), np.where(gone, -1, 1), minlength=0)
        entries = entries.replace_schema_metadata(
            {
                SLOTS_KEY: str(slots).encode(),
                SLOT_ROWS_KEY: ",".join(map(str, np.bincount(slot, minlength=slots))).encode(),
                BUCKET_ROWS_KEY: ",".join(
                    f"{b}:{n}" for b, n in enumerate(net.astype(np.int64).tolist()) if n
                ).encode(),
                TOMBSTONES_KEY: str(int(gone.sum())).encode(),
                **({RESTATES_KEY: ",".join(sorted(restates)).encode()} if restates else {}),
            }
        )
        path = f"{self.dir(partition)}/{index_name(instant, kind, task)}"
        # Keys and hashes are unique: a dictionary of them is work for nothing.
        repeating = [BUCKET, FILE_ID, INSTANT, OP]
        size = (files or self.store).write_parquet(
            path,
            entries,
            row_group_size=ROW_GROUP,
            write_statistics=[HASH],
            use_dictionary=repeating,
        )
        written = index_file(path, size)
        assert written is not None  # named by ``index_name``
        return written

    def compact(
        self, partition: str, instant: str, visible: Collection[str], until: str = ""
    ) -> DataFile | None:
        """Merges the partition's visible index files into one base file of ``instant``:
        each key's newest entry when it is an insert (tombstones, and the entries they
        retire, go). ``until``: only the files of instants before it (writes pending when
        the compaction was planned: their deltas stay after the base, ``file_names.py``).

        Returns None when there is nothing to merge (at most one file).
        """
        if until:
            visible = (
                visible.before(until)
                if isinstance(visible, Visible)
                else [i for i in visible if i < until]
            )
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        if len(files) < 2:
            return None
        import pyarrow.dataset as pads  # here: it loads pandas, which a slot actor never needs

        merged = pads.dataset(
            [f.path for f in files], format="parquet", filesystem=self.store.fs, schema=self.schema
        ).to_table()
        # The slot count of the newest file: the one the table's writes use now.
        slots = _parse_footer(pq.ParquetFile(files[-1].path, filesystem=self.store.fs)).slots
        tag = base_tag(until)
        entries = live(conform(merged, self.schema))
        restates = [f.instant for f in files]
        return self.write(partition, instant, entries, "base", tag, slots=slots, restates=restates)

    def merge_deltas(
        self, partition: str, instant: str, deltas: Sequence[DataFile], until: str = ""
    ) -> DataFile:
        """Writes the entries of ``deltas`` (a run of the partition's newest, oldest first;
        all before ``until`` when given) as one merged delta of ``instant``
        (``files.merged_delta_name``): entries never change, so merging them is their
        union, whatever else the partition holds (its tombstones stay: older files may
        hold the entries they retire)."""
        tables = [
            pq.read_table(f.path, filesystem=self.store.fs, partitioning=None) for f in deltas
        ]
        merged = pa.concat_tables([conform(t, self.schema) for t in tables])
        slots = _parse_footer(pq.ParquetFile(deltas[-1].path, filesystem=self.store.fs)).slots
        tag = merged_delta_tag(deltas[0].instant, until)
        restates = [d.instant for d in deltas]
        return self.write(partition, instant, merged, "delta", tag, slots=slots, restates=restates)

    # --- reading -------------------------------------------------------------------------

    def files(
        self, partition: str, visible: Collection[str]
    ) -> tuple[DataFile | None, list[DataFile]]:
        """The partition's visible index slice: newest base, then deltas after it."""
        return latest_slice(index_files(self.store, partition), visible)

    def record_index_locations(
        self,
        partition: str,
        visible: Collection[str],
        columns: Sequence[str] | None = None,
        raw: bool = False,
    ) -> pa.Table:
        """The live entries of ``partition`` (each key's newest entry, when an insert) as
        Arrow, reading only ``columns`` (all by default).

        The proposal's lookup path: what a slot's cache bootstraps from. ``raw``: every
        entry of every visible file instead, tombstones and what they retire included
        (``columns`` then gains ``_op`` and ``_instant``), for ``check``.
        """
        cols = list(columns) if columns is not None else self.schema.names
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        parquets = [pq.ParquetFile(f.path, filesystem=self.store.fs) for f in files]
        resolve = raw or any(_parse_footer(p).tombstones for p in parquets)
        read = _with_resolving(cols) if resolve else cols
        if not files:
            return conform(self.schema.empty_table(), self.schema).select(read)
        tables = [_read(p, read) for p in parquets]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if raw or not resolve:
            return table
        return live(table).select(cols)

    def slot_slice(
        self,
        partition: str,
        visible: Collection[str],
        columns: Sequence[str],
        slot: int,
        num_slots: int,
    ) -> SlotSlice:
        """The live entries of ``partition`` that belong to ``slot`` of ``num_slots``.

        1. Per visible file, its footer: slot count ``S``, entries per slot, live keys per
           bucket, tombstones.
        2. The file's slots that can hold a key of ``slot``: ``r`` with
           ``r = slot (mod gcd(S, num_slots))`` (a hash is ``r`` mod ``S`` and ``slot`` mod
           ``num_slots`` at once only then); one of them when ``S == num_slots``.
        3. Read the row groups covering their rows, cut to those rows, and keep the keys of
           ``slot`` (all of them when ``S`` is a multiple of ``num_slots``).
        4. When a file holds tombstones, each key's newest entry, if an insert (one run);
           else the runs are disjoint already.
        """
        base, deltas = self.files(partition, visible)
        return self._slice(([base] if base else []) + deltas, columns, slot, num_slots)

    def slot_catch_up(
        self,
        partition: str,
        visible: Collection[str],
        seen: AbstractSet[str],
        columns: Sequence[str],
        slot: int,
        num_slots: int,
    ) -> SlotSlice | None:
        """What a cache of ``slot`` holding the index files of ``seen`` misses of the
        partition's visible slice: ``slot``'s entries of the deltas it has not seen, every
        entry (tombstones too: with ``_hash``, ``_instant`` and ``_op``, :func:`live`
        tells each key's newest), with every slot's live keys gained per bucket, and the
        instants of the whole slice in ``instants``. A base or a merged delta it has not
        seen that restates only files it holds (its footer's ``RESTATES_KEY``: another
        writer's index compaction of what this cache caught up with) adds nothing and is
        taken as seen. None when one restates a file it does not hold, or does not say
        what it restates (a rescale's base, a file written before the key): what it misses
        cannot be told apart from what it holds."""
        base, deltas = self.files(partition, visible)
        held = set(seen)
        for merged in ([base] if base is not None else []) + [d for d in deltas if d.merges_from]:
            if merged.instant in held:
                continue
            restates = _footer(self.store, merged).restates
            if restates is None or not restates <= held:
                return None
            held.add(merged.instant)
        missed = [d for d in deltas if d.instant not in held]
        found = self._slice(missed, _with_resolving(columns), slot, num_slots, raw=True, kept=True)
        slice_ = frozenset(f.instant for f in ([base] if base else []) + deltas)
        return dataclasses.replace(found, instants=slice_)

    def _slice(
        self,
        files: Sequence[DataFile],
        columns: Sequence[str],
        slot: int,
        num_slots: int,
        raw: bool = False,
        kept: bool = False,
    ) -> SlotSlice:
        """``slot_slice``'s steps over ``files`` (``raw``: without step 4; ``kept``:
        deltas through the process's cache of deltas, :func:`delta_entries`)."""
        opened = [_opened(self.store, self.spec, f, kept) for f in files]
        resolve = not raw and any(footer.tombstones for footer, _ in opened)  # 1.
        read_cols = _with_resolving(columns) if resolve else list(columns)
        runs: list[pa.Table] = []
        counts = np.zeros(0, np.int64)
        read = total = 0
        for footer, source in opened:
            slots, slot_rows, bucket_rows = footer.slots, footer.slot_rows, footer.bucket_rows
            whole = source if isinstance(source, pa.Table) else None
            total += whole.num_rows if whole is not None else source.metadata.num_rows
            if bucket_rows is None:  # an older file: read whole, counted here
                table = whole if whole is not None else _read(source, list({*columns, BUCKET}))
                bucket_rows = np.bincount(table.column(BUCKET).to_numpy())
            counts = _add(counts, bucket_rows)
            ends = np.cumsum(slot_rows)
            g = math.gcd(slots, num_slots)
            for r in range(slot % g, slots, g):  # 2.
                start, stop = int(ends[r] - slot_rows[r]), int(ends[r])
                if start == stop:
                    continue
                if whole is not None:  # 3.
                    section, first = with_op(whole.slice(start, stop - start), read_cols), start
                else:
                    section, first = _read_rows(source, start, stop, read_cols)
                read += section.num_rows
                section = section.slice(start - first, stop - start)
                if slots % num_slots:
                    mine = slot_of(section.column(HASH).to_numpy(), num_slots) == slot
                    section = section.filter(pa.array(mine))
                runs.append(section)
        if resolve and runs:  # 4.
            runs = [live(pa.concat_tables(runs)).select(list(columns))]
        return SlotSlice(runs, counts, read, total, frozenset(f.instant for f in files))

    def lookup(
        self,
        partition: str,
        hashes: np.ndarray,
        visible: Collection[str],
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The live entries of ``partition`` whose hash is in ``hashes``, reading only
        ``columns`` (all by default; ``_hash`` always).

        1. Per visible file, its footer: the slot count ``S``, the rows of each slot's
           section, each row group's rows and hash range, its tombstones.
        2. A hash can only be in the section of slot ``pmod(hash, S)``, sorted by hash: of
           the row groups covering that section, only those whose hash range holds it (one,
           unless the section ends inside the row group).
        3. Read those row groups, keep the rows of the hashes.
        4. When a file holds tombstones, each key's newest entry, if an insert.

        Footers and decoded row groups are kept per process, up to ``LOOKUP_CACHE_BYTES``
        (an index file never changes once written): a lookup service asks the same
        partitions again and again, as Hudi's readers of its record index keep HFile blocks.
        """
        cols = list(dict.fromkeys([HASH, *(columns if columns is not None else self.schema.names)]))
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        wanted = np.unique(np.asarray(hashes, np.int64))
        footers = [_footer(self.store, f) for f in files] if len(wanted) else []  # 1.
        resolve = any(footer.tombstones for footer in footers)
        read_cols = _with_resolving(cols) if resolve else cols
        found = []
        for f, footer in zip(files, footers, strict=False):
            groups = footer.row_groups_holding(wanted)  # 2.
            for group in groups:  # 3.
                table, hashes_read = _row_group(self.store, f, footer, group, read_cols)
                at = np.flatnonzero(np.isin(hashes_read, wanted))
                if len(at):
                    found.append(table.take(pa.array(at)))
        if not found:
            return self.schema.empty_table().select(cols)
        table = pa.concat_tables(found)
        return live(table).select(cols) if resolve else table  # 4.

    def partitions(self) -> list[str]:
        """Partition paths that have index files."""
        root = self.store.path(RLI_DIR)
        found = set()
        for info in self.store.list_files(root, recursive=True):
            rel = info.path[len(root) :].strip("/")
            found.add(rel.rsplit("/", 1)[0] if "/" in rel else "")
        return sorted(found)


def _with_resolving(columns: Sequence[str]) -> list[str]:
    """``columns`` and what :func:`live` needs."""
    return list(dict.fromkeys([*columns, HASH, INSTANT, OP]))


def _read(
    parquet: pq.ParquetFile, columns: Sequence[str], groups: Sequence[int] | None = None
) -> pa.Table:
    """``columns`` of an index file, whole or its row groups ``groups`` (``_op`` upsert
    where the file, written before tombstones, has none)."""
    present = [c for c in columns if c in parquet.schema_arrow.names]
    if groups is None:
        table = parquet.read(columns=present)
    else:  # one row group at a time: decoding it on pyarrow's pool cost more than it saved
        table = parquet.read_row_groups(groups, columns=present, use_threads=len(groups) > 1)
    return with_op(table, columns)


@dataclass(frozen=True)
class _Footer:
    """What a lookup needs of an index file's footer."""

    metadata: pq.FileMetaData
    section_start: npt.NDArray[np.int64]
    section_stop: npt.NDArray[np.int64]
    group_start: npt.NDArray[np.int64]
    group_stop: npt.NDArray[np.int64]
    hash_min: npt.NDArray[np.int64]
    hash_max: npt.NDArray[np.int64]
    tombstones: int
    restates: frozenset[str] | None = None
    """``_Parsed.restates``."""

    def row_groups_holding(self, hashes: npt.NDArray[np.int64]) -> list[int]:
        """Row groups that can hold one of ``hashes``: inside the hash's slot section,
        with a hash range around it."""
        section = slot_of(hashes, len(self.section_start))[:, None]
        h = hashes[:, None]
        can = (
            (self.group_start < self.section_stop[section])
            & (self.group_stop > self.section_start[section])
            & (self.hash_min <= h)
            & (self.hash_max >= h)
        )
        return np.flatnonzero(can.any(axis=0)).tolist()


#: Footers of index files read by lookups, by path and size (a file never changes once
#: written; the size tells apart a file written again under a name, as a test may).
_FOOTERS: caches.Kept[tuple[str, int], _Footer] = caches.Kept(512)

#: Bytes of decoded index row groups that lookups keep per process.
LOOKUP_CACHE_BYTES = 64 * 1024 * 1024

_Read = tuple[pa.Table, npt.NDArray[np.int64]]
_GROUPS: caches.Kept[tuple[str, int, int, tuple[str, ...]], _Read] = caches.Kept(
    LOOKUP_CACHE_BYTES, size=lambda read: read[0].nbytes
)


def clear_lookup_cache() -> None:
    """Forgets the footers and row groups lookups kept, and the deltas kept."""
    for kept in (_GROUPS, _FOOTERS, _DELTAS):
        kept.clear()


def _row_group(
    store: TableStore, f: DataFile, footer: _Footer, group: int, columns: list[str]
) -> _Read:
    """Row group ``group`` of index file ``f`` (``columns``, the hash first), and its
    hashes as numpy; kept, the least recently used dropped past ``LOOKUP_CACHE_BYTES``."""

    def read() -> _Read:
        parquet = pq.ParquetFile(f.path, filesystem=store.fs, metadata=footer.metadata)
        table = _read(parquet, columns, [group]).replace_schema_metadata(None)
        return table, table.column(HASH).to_numpy()

    return _GROUPS.read((f.path, f.size, group, tuple(columns)), read)


def _footer(store: TableStore, f: DataFile) -> _Footer:
    return _FOOTERS.read((f.path, f.size), lambda: _read_footer(store, f))


def _read_footer(store: TableStore, f: DataFile) -> _Footer:
    parquet = pq.ParquetFile(f.path, filesystem=store.fs)
    metadata = parquet.metadata
    parsed = _parse_footer(parquet)
    slot_rows = parsed.slot_rows
    groups = metadata.num_row_groups
    rows = np.array([metadata.row_group(i).num_rows for i in range(groups)], np.int64)
    low = np.full(groups, np.iinfo(np.int64).min, np.int64)
    high = np.full(groups, np.iinfo(np.int64).max, np.int64)
    at = metadata.schema.to_arrow_schema().get_field_index(HASH)
    for i in range(groups):
        stats = metadata.row_group(i).column(at).statistics
        if stats is not None and stats.has_min_max:
            low[i], high[i] = stats.min, stats.max
    stops = np.cumsum(slot_rows)
    ends = np.cumsum(rows)
    return _Footer(
        metadata,
        stops - slot_rows,
        stops,
        ends - rows,
        ends,
        low,
        high,
        parsed.tombstones,
        parsed.restates,
    )


#: Bytes of completed index deltas read whole that a process keeps (:func:`delta_entries`).
DELTA_CACHE_BYTES = 32 * 1024 * 1024
_DELTAS: caches.Kept[tuple[str, str], tuple[_Parsed, pa.Table]] = caches.Kept(
    DELTA_CACHE_BYTES, size=lambda read: read[1].nbytes, largest=DELTA_CACHE_BYTES // 8
)


def delta_entries(
    store: TableStore, spec: TableSpec, path: str, columns: Sequence[str]
) -> pa.Table:
    """``columns`` of every entry of a completed write's index file (a delta) of the table
    ``spec`` defines, kept (:func:`_delta`)."""
    return with_op(_delta(store, spec, path)[1], columns)


def _delta(store: TableStore, spec: TableSpec, path: str) -> tuple[_Parsed, pa.Table]:
    """A completed write's index file (a delta): its footer and every entry, kept.

    Beside other writers, each write reads the deltas the others committed meanwhile
    twice: its commit's conflict check reads them whole, and its caches' catch-up at the
    next write reads each slot's section of them (a file open and a row-group read per
    slot and partition, 20-30 ms a write of four partitions). Kept by the table's id and the
    path: a completed instant's files never change (a write run again is a new instant,
    under new names), only deltas of completed instants come here, and a table deleted
    and created again at the path has another id. The least recently used go past
    ``DELTA_CACHE_BYTES``; a file larger than an eighth of it is read, not kept."""

    def read() -> tuple[_Parsed, pa.Table]:
        parquet = pq.ParquetFile(path, filesystem=store.fs)
        return _parse_footer(parquet), parquet.read().replace_schema_metadata(None)

    return _DELTAS.read((spec.table_id, path), read)


def _opened(
    store: TableStore, spec: TableSpec, f: DataFile, kept: bool
) -> tuple[_Parsed, pq.ParquetFile | pa.Table]:
    """An index file's footer, and the file to read from or (``kept`` and a delta) all its
    entries."""
    if kept and f.kind == "delta":
        return _delta(store, spec, f.path)
    parquet = pq.ParquetFile(f.path, filesystem=store.fs)
    return _parse_footer(parquet), parquet


@dataclass(frozen=True)
class _Parsed:
    """What an index file's footer says (``SLOTS_KEY`` and the others)."""

    slots: int
    slot_rows: npt.NDArray[np.int64]
    bucket_rows: npt.NDArray[np.int64] | None
    """Live keys each bucket id gains (None: unknown, a file written before footers)."""
    tombstones: int
    restates: frozenset[str] | None = None
    """A merged file's: the instants of the files it restates (None: not said)."""


def _parse_footer(parquet: pq.ParquetFile) -> _Parsed:
    """Slot count, entries per slot, live keys gained per bucket id and tombstones from an
    index file's footer; a file written before footers were (sorted by hash alone) is one
    slot, buckets unknown, and a file written before tombstones has none."""
    metadata = parquet.schema_arrow.metadata or {}
    if SLOTS_KEY not in metadata:
        return _Parsed(1, np.array([parquet.metadata.num_rows], np.int64), None, 0)
    slots = int(metadata[SLOTS_KEY])
    slot_rows = np.array(metadata[SLOT_ROWS_KEY].decode().split(","), np.int64)
    pairs = [p.split(":") for p in metadata[BUCKET_ROWS_KEY].decode().split(",") if p]
    bucket_rows = np.zeros(max((int(b) for b, _ in pairs), default=-1) + 1, np.int64)
    for b, n in pairs:
        bucket_rows[int(b)] = int(n)
    restates = (
        frozenset(filter(None, metadata[RESTATES_KEY].decode().split(",")))
        if RESTATES_KEY in metadata
        else None
    )
    tombstones = int(metadata.get(TOMBSTONES_KEY, b"0"))
    return _Parsed(slots, slot_rows, bucket_rows, tombstones, restates)


def _read_rows(
    parquet: pq.ParquetFile, start: int, stop: int, columns: Sequence[str]
) -> tuple[pa.Table, int]:
    """The row groups of ``parquet`` that hold rows ``[start, stop)``, and the first row
    they hold."""
    groups, first, at = [], None, 0
    for i in range(parquet.metadata.num_row_groups):
        n = parquet.metadata.row_group(i).num_rows
        if at < stop and at + n > start:
            groups.append(i)
            first = at if first is None else first
        at += n
    return _read(parquet, columns, groups), int(first or 0)


def _add(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    n = max(len(a), len(b))
    return np.pad(a, (0, n - len(a))) + np.pad(b, (0, n - len(b)))
