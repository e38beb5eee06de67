"""The assigner's view of the record-level index: bootstrap loads and file-group sizes.

Picklable, so each assigner actor builds its own. Reads only committed files (the instant in
flight is invisible). Two sources, one contract (``index_source``):

* :class:`RLIIndexSource`: dynbucket's own index (``format/index/rli.py``), only the
  ``_hash`` and ``_bucket`` columns of the slot's own section of each index file, sorted by
  hash already: the slot's run is a merge, not a sort.
* :class:`MetadataIndexSource`: Hudi's partitioned record index in the metadata table, the
  proposal's source of truth, for a table that keeps one (version 9 with a
  partition-scoped index). A slot reads its data partition's record-index groups whole
  (Hudi groups keys by Java's ``hashCode`` of the key's text, not by slot) and keeps its
  own keys.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dynbucket.actors.cache import release_unused_memory, to_cache_keys, union_arrays
from dynbucket.actors.partition_index import PartitionCatchUp, PartitionLoad
from dynbucket.base.columns import BUCKET, HASH
from dynbucket.base.keyhash import key_hashes, slot_of
from dynbucket.format.file_group import adopted
from dynbucket.format.file_group.slices import data_files, file_slices
from dynbucket.format.hudi.files import is_bucket_file_id
from dynbucket.format.hudi.meta_fields import parse_record_keys
from dynbucket.format.index.entries import keys_and_live
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.reader import RECORD_INDEX, MetadataTable
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import TableRef
from dynbucket.format.timeline.timeline import Timeline

log = logging.getLogger(__name__)


class RLIIndexSource:
    """``IndexSource`` over a table's partitioned record-level index."""

    def __init__(self, table: TableRef) -> None:
        self.table = table
        self.spec = table.spec

    @property
    def store(self) -> TableStore:
        return self.table.store

    def _visible(self) -> frozenset[str]:
        return Timeline(self.store).visible()

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        """:meth:`load` of each of ``partitions``, the timeline read once for all."""
        visible = self._visible()
        return {p: self._load_as_of(p, slot, num_slots, visible) for p in partitions}

    def load(self, partition: str, slot: int, num_slots: int) -> PartitionLoad:
        """``slot``'s entries of ``partition`` (its own section of each index file, not the
        whole partition), with every slot's key count per bucket (from the footers)."""
        return self._load_as_of(partition, slot, num_slots, self._visible())

    def _load_as_of(
        self, partition: str, slot: int, num_slots: int, visible: AbstractSet[str]
    ) -> PartitionLoad:
        section = RecordLevelIndex(self.store, self.spec).slot_slice(
            partition, visible, [HASH, BUCKET], slot, num_slots
        )
        runs = [
            (
                to_cache_keys(t.column(HASH).to_numpy()),
                t.column(BUCKET).to_numpy().astype(np.uint16),
            )
            for t in section.runs
        ]
        bucket_keys, entries_read = section.bucket_keys, section.entries_read
        seen = section.instants
        del section  # its Arrow tables: only the cache's arrays stay
        keys, buckets = union_arrays(runs)
        # What the reads allocated goes back to the system, not to the slot's resident size.
        release_unused_memory()
        return PartitionLoad(
            keys=keys,
            buckets=buckets,
            bucket_keys=bucket_keys,
            bucket_bytes=self.bucket_bytes(partition)
            if self.spec.dynamic_options.by_bytes
            else None,
            entries_scanned=entries_read,
            seen=seen,
        )

    def catch_up(
        self, seen: Mapping[str, AbstractSet[str]], slot: int, num_slots: int
    ) -> dict[str, PartitionCatchUp | None]:
        """Per partition, what the index deltas committed since a cache holding ``seen``
        say for ``slot``: its keys they insert and delete, every slot's counts
        (``RecordLevelIndex.slot_catch_up``; None: the cache loads again). The timeline is
        read once for all partitions."""
        visible = self._visible()
        return {p: self._catch_up(p, visible, s, slot, num_slots) for p, s in seen.items()}

    def _catch_up(
        self,
        partition: str,
        visible: AbstractSet[str],
        seen: AbstractSet[str],
        slot: int,
        num_slots: int,
    ) -> PartitionCatchUp | None:
        found = RecordLevelIndex(self.store, self.spec).slot_catch_up(
            partition, visible, seen, [HASH, BUCKET], slot, num_slots
        )
        if found is None:
            return None
        entries = pa.concat_tables(found.runs) if found.runs else None
        touched = np.empty(0, np.uint64)
        keys, buckets = np.empty(0, np.uint64), np.empty(0, np.uint16)
        if entries is not None and entries.num_rows:
            named, inserted = keys_and_live(entries)  # sorted by hash: cache keys keep it
            touched = to_cache_keys(named)
            keys = to_cache_keys(inserted.column(HASH).to_numpy())
            buckets = inserted.column(BUCKET).to_numpy().astype(np.uint16)
        return PartitionCatchUp(
            touched,
            keys,
            buckets,
            found.bucket_keys,
            found.instants,
            self.bucket_bytes(partition) if self.spec.dynamic_options.by_bytes else None,
        )

    def partitions(self) -> list[str]:
        """Every partition with index files (a global index's slot loads them all)."""
        return RecordLevelIndex(self.store, self.spec).partitions()

    def bucket_bytes(self, partition: str) -> npt.NDArray[np.int64]:
        """Bytes of each bucket's latest slice (base + logs), by bucket id."""
        slices = file_slices(data_files(self.store, partition), self._visible())
        out = np.zeros(max((s.bucket for s in slices), default=-1) + 1, np.int64)
        for s in slices:
            out[s.bucket] += s.size
        return out


class MetadataIndexSource(RLIIndexSource):
    """``IndexSource`` over Hudi's partitioned record index (the metadata table's
    ``record_index``), dynbucket's own index where the metadata table cannot answer.

    A slot reads a partition's record index whole (about 0.75 s for 1,000,000 keys, against
    0.03 s for its section of dynbucket's index), and a slot bootstraps a partition again
    after the proposal's eviction of it, at every micro-batch that only updates it. So
    the first load of a partition is compared with what dynbucket's index gives; while
    they agree and the partition's record index is made of the same files (an update
    leaves a key where it is: no record-index write), a load takes dynbucket's index,
    which holds the same keys.
    """

    def __init__(self, table: TableRef) -> None:
        super().__init__(table)
        self._agreed: dict[tuple[str, int, int], tuple[str, ...]] = {}

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        """:meth:`load` of each of ``partitions`` (each compares the two indexes as of
        its own reads)."""
        return {p: self.load(p, slot, num_slots) for p in partitions}

    def load(self, partition: str, slot: int, num_slots: int) -> PartitionLoad:
        """``slot``'s keys of ``partition`` by the record index, with every slot's key
        count per bucket.

        1. The partition's record-index files; if dynbucket's index agreed with them when
           this source last read them, dynbucket's index answers.
        2. The partition's live keys and their file groups (``record_locations``: its
           groups read whole, as Arrow).
        3. Each key's fields read back from its text and hashed as every write hashes
           them; the keys of ``slot`` kept, sorted.
        4. Each key's bucket by its file group; the keys per bucket counted over all.
        5. Compared with dynbucket's index as of the same instants: equal, the files are
           remembered (step 1). A writer beside that completed an instant during the
           reads leaves the two views of different moments: not compared, read again at
           the next load.

        Answered by dynbucket's own index instead when the table keeps no partitioned
        record index (a version 6 table, an adopted one whose record index was set aside,
        one created with the global layout), a key's text does not read back
        (``parse_record_keys``) or a key is in a file group that is no bucket.
        """
        mdt = self._metadata()
        if mdt is None:
            return super().load(partition, slot, num_slots)
        before = self._visible()
        state = mdt.record_index_state(partition)  # 1.
        if self._agreed.get((partition, slot, num_slots)) == state:
            return super().load(partition, slot, num_slots)
        located = self._located(mdt, partition)
        if located is None:
            return super().load(partition, slot, num_slots)
        hashes, buckets = located
        mine = slot_of(hashes, num_slots) == slot  # 3.
        keys = to_cache_keys(hashes[mine])
        order = np.argsort(keys)  # keys are unique: any sort is the one order
        load = PartitionLoad(
            keys=keys[order],
            buckets=buckets[mine][order].astype(np.uint16),
            bucket_keys=np.bincount(buckets).astype(np.int64),  # 4.
            bucket_bytes=self.bucket_bytes(partition)
            if self.spec.dynamic_options.by_bytes
            else None,
            entries_scanned=len(hashes),
            seen=None,  # the record index's state: a cache of it loads again to catch up
        )
        own = self._load_as_of(partition, slot, num_slots, before)  # 5.
        if self._visible() != before:
            return load  # an instant completed meanwhile: the views are of two moments
        if _same_keys(load, own):
            self._agreed[(partition, slot, num_slots)] = state
        else:
            log.warning(
                "partition %r: dynbucket's index differs from the metadata table's record "
                "index; the record index answers (`dynbucket check` names the keys)",
                partition,
            )
        return load

    def _metadata(self) -> MetadataTable | None:
        """The metadata table, if it keeps a partitioned record index."""
        if RECORD_INDEX not in metadata_partitions.partitions(self.store):
            return None
        mdt = MetadataTable(self.store)
        return mdt if mdt.partitioned() else None

    def _located(
        self, mdt: MetadataTable, partition: str
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """Steps 2-4: every key's hash and bucket, or None where dynbucket's index
        answers."""
        located = mdt.record_locations(partition)  # 2.
        fields = [self.spec.schema.field(name) for name in self.spec.record_key]
        values = parse_record_keys(located.column("key"), fields)
        if values is None:
            log.warning(
                "partition %r: a record key in the metadata table's record index does not "
                "read back into its fields; its slots load from dynbucket's index",
                partition,
            )
            return None
        hashes = key_hashes(values, self.spec.record_key)
        coded = located.column("file_id").combine_chunks().dictionary_encode()
        files = adopted.load(self.store)
        groups = coded.dictionary.to_pylist()
        if any(f not in files.buckets and not is_bucket_file_id(f) for f in groups):
            return None  # a file group neither dynbucket's nor adopted: not a bucket
        group_buckets = np.array([files.bucket_of(f) for f in groups], np.int64)
        buckets = group_buckets[coded.indices.to_numpy()] if len(coded) else group_buckets[:0]
        if (buckets < 0).any():
            return None
        return hashes, buckets


def _same_keys(a: PartitionLoad, b: PartitionLoad) -> bool:
    """Whether two loads hold the same keys in the same buckets, and the same counts."""
    n = max(len(a.bucket_keys), len(b.bucket_keys))
    return (
        np.array_equal(a.keys, b.keys)
        and np.array_equal(a.buckets, b.buckets)
        and np.array_equal(
            np.pad(a.bucket_keys, (0, n - len(a.bucket_keys))),
            np.pad(b.bucket_keys, (0, n - len(b.bucket_keys))),
        )
    )


def index_source(table: TableRef) -> Callable[[], RLIIndexSource]:
    """What each slot of ``table`` builds its index source with: the metadata table's
    record index for a table that may keep a partitioned one, else dynbucket's index."""
    if table.spec.table_version >= 8 and table.spec.partitioned_record_index:
        return functools.partial(MetadataIndexSource, table)
    return functools.partial(RLIIndexSource, table)
