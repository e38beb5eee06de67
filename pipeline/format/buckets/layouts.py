"""The bucket layout in force per partition, as of an instant: how keys map to buckets.

For a simple-bucket table, a partition's bucket count; for a consistent-hashing table, its
ring. A partition starts with the layout its definition gives (the table's count or the
first matching ``partition_buckets`` rule; an initial ring of equal ranges). An instant that
changes layouts (a rescale, a rebalance) writes ``<instant>.json`` under
``.hoodie/.dynbucket/buckets/`` with the new layout of each partition it changed, in the
same instant as the files it rewrote: a snapshot sees a layout file only when its instant is
visible, so readers and writers see the old layout or the new, never a mix.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dynbucket.base.columns import HASH
from dynbucket.base.errors import TableCorruptedError
from dynbucket.base.options import (
    ConsistentHashingIndex,
    IndexOptions,
    SimpleBucketIndex,
)
from dynbucket.format.buckets.hudi_hash import bucket_ids, list_hashes
from dynbucket.format.buckets.ring import Ring
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import BUCKET_LAYOUT_DIR

_NUM = "num-buckets"
_RING = "ring"


@dataclass(frozen=True)
class BucketLayouts:
    """Every partition's layout as of some instants (small; shipped to Spark tasks)."""

    index: IndexOptions
    key_fields: tuple[str, ...]
    changed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """partition -> its layout as the latest visible layout file recorded it."""

    @classmethod
    def load(
        cls,
        store: TableStore,
        index: IndexOptions,
        key_fields: tuple[str, ...],
        visible: Collection[str],
    ) -> BucketLayouts:
        """The layouts as of the ``visible`` instants (every layout file of theirs, in
        instant order)."""
        changed: dict[str, Mapping[str, Any]] = {}
        if isinstance(index, SimpleBucketIndex | ConsistentHashingIndex):
            names = sorted(i.base_name for i in store.list_files(store.path(BUCKET_LAYOUT_DIR)))
            for name in names:
                instant = name.split(".", 1)[0]
                if instant not in visible or not name.endswith(".json"):
                    continue
                path = store.path(BUCKET_LAYOUT_DIR, name)
                try:
                    doc = json.loads(store.read_bytes(path))
                    changed.update(doc["partitions"])
                except (OSError, ValueError, KeyError) as e:
                    raise TableCorruptedError(
                        f"{path}: unreadable bucket layout ({e}) of completed instant "
                        f"{instant}; restore it from a backup"
                    ) from e
        return cls(index, key_fields, changed)

    def num_buckets(self, partition: str) -> int:
        """A simple-bucket partition's bucket count."""
        assert isinstance(self.index, SimpleBucketIndex)
        doc = self.changed.get(partition)
        return int(doc[_NUM]) if doc else self.index.buckets_of(partition)

    def ring(self, partition: str) -> Ring:
        """A consistent-hashing partition's ring."""
        assert isinstance(self.index, ConsistentHashingIndex)
        doc = self.changed.get(partition)
        return Ring.from_json(doc[_RING]) if doc else Ring.initial(self.index.initial_buckets)

    def buckets(self, partition: str) -> list[int]:
        """The buckets of a partition's layout."""
        if isinstance(self.index, SimpleBucketIndex):
            return list(range(self.num_buckets(partition)))
        return list(self.ring(partition).buckets)

    def locate(self, partition: str, rows: pa.Table | pa.RecordBatch) -> npt.NDArray[np.int32]:
        """The bucket of each row's key (rows of one partition: key fields, ``_hash``)."""
        if isinstance(self.index, SimpleBucketIndex):
            table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
            return bucket_ids(list_hashes(table, self.key_fields), self.num_buckets(partition))
        hashes = rows.column(HASH).to_numpy(zero_copy_only=False)
        return self.ring(partition).locate(hashes)

    def facts(self, partition: str, bucket: int) -> dict[str, Any]:
        """The scheme's own facts of a bucket (for stats)."""
        if isinstance(self.index, SimpleBucketIndex):
            return {"num_buckets": self.num_buckets(partition)}
        start, end = self.ring(partition).range_of(bucket)
        return {"range_start": start, "range_end": end}

    def with_changes(self, changes: Mapping[str, Mapping[str, Any]]) -> BucketLayouts:
        return BucketLayouts(self.index, self.key_fields, {**self.changed, **changes})


def simple_layout(num_buckets: int) -> dict[str, Any]:
    return {_NUM: num_buckets}


def ring_layout(ring: Ring) -> dict[str, Any]:
    return {_RING: ring.to_json()}


def write_layouts(store: TableStore, instant: str, changes: Mapping[str, Mapping[str, Any]]) -> str:
    """Writes the layout file of ``instant`` (visible once the instant completes)."""
    path = store.path(BUCKET_LAYOUT_DIR, f"{instant}.json")
    store.write_atomic(path, json.dumps({"partitions": dict(changes)}, indent=1).encode())
    return path
