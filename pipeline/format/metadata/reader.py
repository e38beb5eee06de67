"""Reading a table's metadata table: the ``files`` listing and the record index.

Each partition of the metadata table is a few file groups (``files-0000-0``,
``record-index-0000-0`` ... ``record-index-<n>-0``), each an HFile base file and the log
files written after it, each log a sequence of HFile data blocks (records added or
replaced), delete blocks (keys gone) and rollback command blocks. A reader takes, per file
group, the newest base file of a valid instant and the logs written at or after it, and
applies their blocks in order. A log belongs to the newest base file whose instant is not
after the log's completion (Hudi 1.x slices by completion time: a log of a write that began
before a compaction was planned but completed after it is the new slice's).

Valid instants: those completed on the metadata table's own timeline (or archived off
it: older than its first active instant, as Hudi's readers take archived instants), less
any the data table has pending (the metadata table commits first, so a writer that died
between the two commits leaves a completed delta of a data write that never completed:
Hudi's readers skip those too). An instant the data timeline does not hold (the metadata
table's own initialisation ``00000000000000000``..., its compactions, data instants since
archived) is valid when completed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.keyhash import hash_columns
from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.hfile import HFile
from dynbucket.format.hudi.hfile_scan import decoded, key_order
from dynbucket.format.metadata import records
from dynbucket.format.metadata.partitions import FILES, RECORD_INDEX
from dynbucket.format.metadata.record_index import (
    Placed,
    group_indexes,
    group_name,
    partition_of,
)
from dynbucket.format.metadata.records import Location
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR
from dynbucket.format.timeline.timeline import hudi_instants, remember_layout

METADATA_DIR = f"{HOODIE_DIR}/metadata"
BASE_NAME = re.compile(r"^(?P<file_id>[^_/]+)_[^_/]+_(?P<instant>\d{17})\.hfile$")
LOG_NAME = re.compile(
    r"^\.(?P<file_id>[^_/]+)_(?P<instant>\d{17})\.log\.(?P<version>\d+)_(?P<token>.+)$"
)


#: Base file path -> the record schema it was written with (a file never changes).
_SCHEMAS: dict[str, str | None] = caches.per_table({})


def metadata_store(store: TableStore) -> TableStore:
    """The metadata table of the table at ``store``, as a table of its own (layout 2)."""
    mdt = TableStore(store.fs, store.path(METADATA_DIR), f"{store.uri}/{METADATA_DIR}")
    remember_layout(mdt, 2)
    return mdt


_CODED = pa.dictionary(pa.int32(), pa.string())

#: What :meth:`Merged.location_table` answers.
LOCATED_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("partition", _CODED),
        ("file_id", _CODED),
        ("instant_millis", pa.int64()),
    ]
)

#: What :meth:`MetadataTable.record_locations` answers (file ids dictionary-coded).
LOCATION_SCHEMA = pa.schema([f for f in LOCATED_SCHEMA if f.name != "partition"])


@dataclass(frozen=True)
class Chunk:
    """Records of one base file or log block: keys, values (None: a delete block's keys),
    and the schema the values were written with."""

    keys: pa.BinaryArray
    values: pa.BinaryArray | None
    schema: str | None


@dataclass(frozen=True)
class Merged:
    """A slice's live records (keys ascending when :func:`merge` was asked to sort them),
    each with its newest value and the schema it was written with (an index into
    ``schemas``)."""

    keys: pa.BinaryArray
    values: pa.BinaryArray
    schema_at: npt.NDArray[np.int64]
    schemas: tuple[str | None, ...]

    def chunks(self) -> list[Chunk]:
        """The records as chunks, one per schema (keys are unique: their order is free)."""
        out = []
        for s, schema in enumerate(self.schemas):
            at = pa.array(np.flatnonzero(self.schema_at == s))
            out.append(Chunk(self.keys.take(at), self.values.take(at), schema))
        return out

    def location_table(self) -> pa.Table:
        """Each record's location as Arrow (``key``, ``partition``, ``file_id``,
        ``instant_millis``), each distinct value decoded once: the keys one instant wrote
        into one file group share their bytes, and the partition and file id are
        dictionary-coded by them (not a string per key: 2M keys' file ids took 0.1 s)."""
        parts: list[tuple[npt.NDArray[np.int64], list[pa.Array]]] = []
        for s, schema in enumerate(self.schemas):
            at = np.flatnonzero(self.schema_at == s)
            if not len(at):
                continue
            whole = len(at) == len(self.values)  # one schema: no take (1M values: 0.1 s)
            coded = (self.values if whole else self.values.take(pa.array(at))).dictionary_encode()
            where = [records.location_of(v, schema) for v in coded.dictionary.to_pylist()]
            indices = coded.indices
            columns = [
                pa.DictionaryArray.from_arrays(indices, pa.array([d.partition for d in where])),
                pa.DictionaryArray.from_arrays(indices, pa.array([d.file_id for d in where])),
                pa.array([d.instant_millis for d in where], pa.int64()).take(indices),
            ]
            parts.append((at, columns))
        if not parts:
            return LOCATED_SCHEMA.empty_table()
        if len(parts) == 1:  # one schema: the records in their order already
            columns = parts[0][1]
        else:  # several dictionaries: decoded, then in record order
            order = pa.array(np.argsort(np.concatenate([at for at, _ in parts])))
            columns = [
                pa.concat_arrays([decoded(p[1][i]) for p in parts]).take(order).dictionary_encode()
                if i < 2
                else pa.concat_arrays([p[1][i] for p in parts]).take(order)
                for i in range(3)
            ]
        return pa.Table.from_arrays([self.keys.cast(pa.string()), *columns], schema=LOCATED_SCHEMA)


def _plain_columns(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary-coded columns decoded."""
    return pa.table(
        {
            n: decoded(c.combine_chunks())
            for n, c in zip(table.column_names, table.columns, strict=True)
        }
    )


def merge(chunks: Iterable[Chunk], sort_keys: bool = True, keep_deletes: bool = False) -> Merged:
    """The live records of ``chunks`` (oldest first): each key's newest record, unless a
    delete (``keep_deletes``: as a null value); keys ascending (``sort_keys``; else in no
    order: a bootstrap needs none).

    1. Concatenate the keys, in record order.
    2. The newest record of each key (:func:`_newest`). One chunk of strictly ascending
       keys (a base file, a block) is its own merge.
    3. Drop the keys whose newest record is a delete; sort the rest by key when asked.
    4. Take the records left, in one pass; none when every record is live and the order
       kept (a partition's keys written once each, never deleted: no copy of them).
    """
    keys, values, schema_at, schemas = [], [], [], []
    for chunk in chunks:  # 1.
        keys.append(chunk.keys)
        n = len(chunk.keys)
        values.append(chunk.values if chunk.values is not None else pa.nulls(n, pa.binary()))
        if chunk.schema not in schemas:
            schemas.append(chunk.schema)
        schema_at.append(np.full(n, schemas.index(chunk.schema), np.int64))
    if not keys:
        return Merged(
            pa.array([], pa.binary()), pa.array([], pa.binary()), np.zeros(0, np.int64), ()
        )
    all_keys = pa.concat_arrays(keys) if len(keys) > 1 else keys[0]
    all_values = pa.concat_arrays(values) if len(values) > 1 else values[0]
    ascending = len(keys) == 1 and (
        len(all_keys) < 2 or not pc.any(pc.less_equal(all_keys[1:], all_keys[:-1])).as_py()
    )
    winners = np.arange(len(all_keys)) if ascending else _newest(all_keys)  # 2.
    live = winners
    if not keep_deletes and all_values.null_count:
        live = winners[pc.is_valid(all_values).to_numpy(zero_copy_only=False)[winners]]  # 3.
    reordered = sort_keys and not ascending
    if reordered:
        live = live[key_order(all_keys.take(pa.array(live)))]
    at = np.concatenate(schema_at)
    if not reordered and len(live) == len(all_keys):  # 4.: every record, in its order
        return Merged(all_keys, all_values, at, tuple(schemas))
    if reordered:
        taken = pa.array(live)
        return Merged(all_keys.take(taken), all_values.take(taken), at[live], tuple(schemas))
    kept = np.zeros(len(all_keys), np.bool_)
    kept[live] = True  # ascending positions: a filter reads the arrays once, in order
    mask = pa.array(kept)
    return Merged(all_keys.filter(mask), all_values.filter(mask), at[live], tuple(schemas))


def _newest(keys: pa.BinaryArray) -> npt.NDArray[np.int64]:
    """The position of each distinct key's last record, ascending (step 2 of
    :func:`merge`; in record order, so that taking them reads the arrays in order).

    1. The 64-bit hashes of the keys' bytes, sorted: every hash once (a partition's keys
       are written once each unless deleted or moved), every record is its key's last.
    2. Else the records of the hashes seen twice (a few: a delete block's keys and the
       records they delete) sorted by hash, the latest of each run of one hash; a run
       whose keys differ (two keys of one hash) sorts the keys themselves instead.
    """
    hashes = hash_columns([keys])
    ordered = np.sort(hashes)  # 1. (a sort of the positions instead: twice as long)
    again = ordered[1:][ordered[1:] == ordered[:-1]]
    if not len(again):
        return np.arange(len(keys))
    involved = np.flatnonzero(  # 2.
        pc.is_in(pa.array(hashes), value_set=pa.array(again)).to_numpy(zero_copy_only=False)
    )
    order = involved[np.argsort(hashes[involved], kind="stable")]
    ordered = hashes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    winners = np.maximum.reduceat(order, starts)
    winner_of = np.repeat(winners, np.diff(np.r_[starts, len(order)]))
    older = order[winner_of != order]
    mine = keys.take(pa.array(older))
    theirs = keys.take(pa.array(winner_of[winner_of != order]))
    if not pc.all(pc.equal(mine, theirs)).as_py():
        by_key = pc.sort_indices(
            pa.table({"k": keys, "n": np.arange(len(keys))}),
            [("k", "ascending"), ("n", "descending")],
        ).to_numpy()
        sorted_keys = keys.take(pa.array(by_key))
        first = np.ones(len(by_key), np.bool_)
        first[1:] = pc.not_equal(sorted_keys[1:], sorted_keys[:-1]).to_numpy(zero_copy_only=False)
        return np.sort(by_key[first])
    newest = np.ones(len(keys), np.bool_)
    newest[older] = False
    return np.flatnonzero(newest)


@dataclass(frozen=True)
class Slice:
    base: str | None
    logs: tuple[str, ...]
    base_size: int = 0
    logs_size: int = 0
    #: Each log's bytes, in ``logs``' order.
    log_sizes: tuple[int, ...] = ()


class MetadataTable:
    """The metadata table of the table at ``store``, as of its valid instants (read on
    first use)."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self.mdt = metadata_store(store)
        self._valid: frozenset[str] | None = None
        self._completion: dict[str, str] = {}
        self._active_from = ""
        self._data_pending: set[str] = set()
        self._record_index_groups: dict[str, Slice] | None = None

    def exists(self) -> bool:
        return self.store.exists(self.store.path(METADATA_DIR, HOODIE_DIR, "hoodie.properties"))

    @property
    def valid(self) -> frozenset[str]:
        """The instants whose files and blocks count (see the module's docstring)."""
        if self._valid is None:
            self._data_pending = {i.id for i in hudi_instants(self.store) if not i.done}
            mdt = hudi_instants(self.mdt)
            done = [i for i in mdt if i.done and i.id not in self._data_pending]
            # Layout 2 names the completion time: ``<id>_<completion>.<action>``.
            self._completion = {i.id: i.done.partition(".")[0][18:] or i.id for i in done}
            self._valid = frozenset(self._completion)
            self._active_from = mdt[0].id if mdt else ""
        return self._valid

    def is_valid(self, instant: str) -> bool:
        """Whether the files and blocks of ``instant`` count: completed and kept, or
        archived (before the first active instant)."""
        if instant in self.valid:
            return True
        return instant < self._active_from and instant not in self._data_pending

    def listing(self) -> dict[str, dict[str, int]]:
        """Each data partition's files (name -> size) by the ``files`` partition; the key
        of a table without partitions is ``""``."""
        merged: dict[str, dict[str, int]] = {}
        for key, value, schema in self._records(FILES):
            if value is None:
                merged.pop(key, None)
            else:
                records.merge_listing(merged.setdefault(key, {}), value, schema)
        merged.pop(records.ALL_PARTITIONS_KEY, None)
        return {("" if k == records.NON_PARTITIONED else k): v for k, v in merged.items()}

    def partitions(self) -> list[str]:
        """The data partitions the ``__all_partitions__`` record names."""
        merged: dict[str, int] = {}
        for key, value, schema in self._records(FILES):
            if key == records.ALL_PARTITIONS_KEY and value is not None:
                records.merge_listing(merged, value, schema)
        return sorted("" if p == records.NON_PARTITIONED else p for p in merged)

    def record_index(self) -> dict[Placed, Location]:
        """Every live key's location by the ``record_index`` partition, by (data
        partition, key): in the partitioned layout a key may be in several partitions
        (:meth:`record_index_table` as objects)."""
        table = self.record_index_table()
        columns = [table.column(c).to_pylist() for c in ("key", "partition", "file_id")]
        millis = table.column("instant_millis").to_pylist()
        return {
            (partition, key): Location(partition, file_id, at)
            for key, partition, file_id, at in zip(*columns, millis, strict=True)
        }

    def record_index_table(self) -> pa.Table:
        """Every live key's location by the ``record_index`` partition, as Arrow (``key``,
        ``partition``, ``file_id``, ``instant_millis``): what :meth:`record_index` holds,
        without a Python object per key (a million keys: 6 s as objects, under 1 s here)."""
        tables = [
            _plain_columns(self.merged(RECORD_INDEX, file_slice).location_table())
            for file_slice in self.file_groups(RECORD_INDEX).values()
        ]
        if not tables:
            return pa.schema(
                [("key", pa.string()), ("partition", pa.string()), *list(LOCATION_SCHEMA)[1:]]
            ).empty_table()
        return pa.concat_tables(tables)

    def record_locations(self, data_partition: str) -> pa.Table:
        """The live keys of data partition ``data_partition`` by the record index, as
        Arrow (``key``, ``file_id``, ``instant_millis``): the proposal's
        ``readRecordIndexLocations(partition)``, what a slot bootstraps from. In the
        partitioned layout it reads the partition's groups only; in the global one, every
        group, keeping the partition's keys."""
        partitioned = self.partitioned()
        tables = []
        for group, file_slice in self._index_groups().items():
            if partitioned and partition_of(group) != data_partition:
                continue
            live = self.merged(RECORD_INDEX, file_slice)
            table = live.location_table()
            if not partitioned:
                mine = pc.equal(table.column("partition").cast(pa.string()), data_partition)
                table = table.filter(mine)
            tables.append(table.drop_columns(["partition"]))
        if not tables:
            return LOCATION_SCHEMA.empty_table()
        return pa.concat_tables(tables)

    def record_index_state(self, data_partition: str) -> tuple[str, ...]:
        """What the record index of ``data_partition`` (partitioned layout) is made of
        now: its groups' base files and the logs of valid instants. Files never change
        once written, so two equal states hold the same keys."""
        out: list[str] = []
        for group, file_slice in sorted(self._index_groups().items()):
            if partition_of(group) != data_partition:
                continue
            out.append(file_slice.base or "")
            for name in file_slice.logs:
                m = LOG_NAME.match(name)
                if m is not None and self.is_valid(m["instant"]):
                    out.append(name)
        return tuple(out)

    def merged(self, partition: str, file_slice: Slice) -> Merged:
        """One slice's live records in no order, its base and log blocks merged
        (:func:`merge`): the whole-group read, compiled (``hfile_scan.py``);
        :meth:`slice_records` walks the same records one by one."""
        return merge(self._chunks(partition, file_slice), sort_keys=False)

    def _chunks(self, partition: str, file_slice: Slice) -> Iterator[Chunk]:
        """The slice's records as Arrow, oldest first: the base, then each valid block."""
        if file_slice.base is not None:
            base = HFile.read(self._read(partition, file_slice.base), file_slice.base)
            yield Chunk(*base.arrays(), base.schema)
        blocks = [
            b
            for name in file_slice.logs
            for b in log_file.read_blocks(self._read(partition, name), skip_corrupt=True)
        ]
        rolled_back = log_file.rolled_back(blocks)
        for block in blocks:
            if not self.is_valid(block.instant) or block.instant in rolled_back:
                continue
            if block.type == log_file.HFILE_DATA:
                content = HFile.read(bytes(block.content), f"{partition} log block {block.instant}")
                yield Chunk(*content.arrays(), block.header.get(log_file.SCHEMA))
            elif block.type == log_file.DELETE:
                keys = log_file.delete_keys(block).cast(pa.binary())
                yield Chunk(keys, None, None)

    def file_groups(self, partition: str) -> dict[str, Slice]:
        """The latest slice of each file group of the metadata partition ``partition``."""
        bases: dict[str, list[tuple[str, str]]] = {}
        logs: dict[str, list[tuple[str, int, str, str]]] = {}
        sizes: dict[str, int] = {}
        for info in self.mdt.list_files(self.mdt.path(partition)):
            name = info.base_name
            sizes[name] = info.size or 0
            m = BASE_NAME.match(name)
            if m is not None and self.is_valid(m["instant"]):
                bases.setdefault(m["file_id"], []).append((m["instant"], name))
                continue
            m = LOG_NAME.match(name)
            if m is not None:
                entry = (m["instant"], int(m["version"]), m["token"], name)
                logs.setdefault(m["file_id"], []).append(entry)
        out = {}
        for file_id in sorted(set(bases) | set(logs)):
            base_instant, base = max(bases.get(file_id, []), default=("", None))
            after = sorted(
                e for e in logs.get(file_id, []) if self._completed_at(e[0]) >= base_instant
            )
            names = tuple(e[3] for e in after)
            each = tuple(sizes[n] for n in names)
            out[file_id] = Slice(base, names, sizes.get(base or "", 0), sum(each), each)
        return out

    def writer_schema(self, file_slice: Slice | None) -> str | None:
        """The record schema a slice's base file was written with (None: no base): what
        a writer keeping the metadata table in step encodes its records with."""
        if file_slice is None or file_slice.base is None:
            return None
        key = self.mdt.path(FILES, file_slice.base)
        found = _SCHEMAS.get(key)
        if found is None:
            found = HFile.read(self._read(FILES, file_slice.base), file_slice.base).schema
            if len(_SCHEMAS) > 256:
                _SCHEMAS.clear()
            _SCHEMAS[key] = found
        return found

    def _completed_at(self, instant: str) -> str:
        """When ``instant`` completed (its id where the timeline does not say, or for an
        instant that is not valid: its blocks are skipped anyway)."""
        return self._completion.get(instant) or instant

    def _records(self, partition: str) -> Iterator[tuple[str, bytes | None, str | None]]:
        """(key, value or None for a delete, writer schema) of every record of the valid
        instants of ``partition``, file group by file group, oldest first."""
        for file_slice in self.file_groups(partition).values():
            yield from self.slice_records(partition, file_slice)

    def slice_records(
        self, partition: str, file_slice: Slice
    ) -> Iterator[tuple[str, bytes | None, str | None]]:
        """(key, value or None for a delete, writer schema) of one slice's records, oldest
        first."""
        for chunk in self._chunks(partition, file_slice):
            keys = chunk.keys.to_pylist()
            values = chunk.values.to_pylist() if chunk.values is not None else [None] * len(keys)
            for key, value in zip(keys, values, strict=True):
                yield key.decode(), value, chunk.schema

    def lookup(self, keys: Iterable[str], partition: str | None = None) -> dict[str, Location]:
        """The locations of ``keys`` (those the index holds; of data partition
        ``partition`` in the partitioned layout): per file group an HFile key lookup in the
        base file (one block read per key), then its logs' blocks."""
        wanted = set(keys)
        out: dict[str, Location] = {}
        groups = {g: s for g, s in self._index_groups().items() if partition_of(g) == partition}
        if not groups:  # a partition never written
            return out
        # Hudi's layouts: each key in the group its hash names (any other: every group).
        names = [group_name(i, partition) for i in range(len(groups))]
        named = names == sorted(groups)
        by_group: dict[str, set[str]] = {}
        if named:
            ordered = sorted(wanted)
            for key, i in zip(ordered, group_indexes(ordered, len(groups)).tolist(), strict=True):
                by_group.setdefault(names[i], set()).add(key)
        for file_id, file_slice in groups.items():
            mine = by_group.get(file_id, set()) if named else wanted
            if not mine:
                continue
            if file_slice.base is not None:
                base = HFile.read(self._read(RECORD_INDEX, file_slice.base), file_slice.base)
                for key in mine:
                    value = base.get(key.encode())
                    if value is not None:
                        out[key] = records.location_of(value, base.schema)
            logs = Slice(None, file_slice.logs)
            for key, value, schema in self.slice_records(RECORD_INDEX, logs):
                if key in mine:
                    if value is None:
                        out.pop(key, None)
                    else:
                        out[key] = records.location_of(value, schema)
        return out

    def partitioned(self) -> bool:
        """Whether the record index has the partitioned layout (``record_index.py``)."""
        return any(partition_of(g) is not None for g in self._index_groups())

    def _index_groups(self) -> dict[str, Slice]:
        """The record index's groups, listed once for this object's lookups (a lookup of
        keys in several partitions asks for each)."""
        if self._record_index_groups is None:
            self._record_index_groups = self.file_groups(RECORD_INDEX)
        return self._record_index_groups

    def _read(self, partition: str, name: str) -> bytes:
        return self.mdt.read_bytes(self.mdt.path(partition, name))
