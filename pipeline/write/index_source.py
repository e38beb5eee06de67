"""The assigner's view of the record-level index: bootstrap loads and file-group sizes.

Picklable, so each assigner actor builds its own. Reads only committed files (the instant in
flight is invisible), only the ``_hash`` and ``_bucket`` columns, and only the slot's own
section of each index file, sorted by hash already: the slot's run is a merge, not a sort.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dynbucket.actors.cache import union_arrays
from dynbucket.actors.keys import to_cache_keys
from dynbucket.actors.memory import release_unused_memory
from dynbucket.actors.partition_index import PartitionLoad
from dynbucket.base.columns import BUCKET, HASH
from dynbucket.format.file_group.slices import data_files, file_slices
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import TableRef
from dynbucket.format.timeline.timeline import Timeline


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

    def load(self, partition: str, slot: int, num_slots: int) -> PartitionLoad:
        """``slot``'s entries of ``partition`` (its own section of each index file, not the
        whole partition), with every slot's key count per bucket (from the footers)."""
        section = RecordLevelIndex(self.store, self.spec).slot_slice(
            partition, self._visible(), [HASH, BUCKET], slot, num_slots
        )
        runs = [
            (
                to_cache_keys(t.column(HASH).to_numpy()),
                t.column(BUCKET).to_numpy().astype(np.uint16),
            )
            for t in section.runs
        ]
        bucket_keys, entries_read = section.bucket_keys, section.entries_read
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
