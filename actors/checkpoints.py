"""The checkpoint flow of a write's assigners, as the write skeleton (``write/instant.py``)
drives it: ``begin`` opens the instant as a checkpoint, ``snapshot`` commits it (each slot
adds the write's new keys per bucket), ``abort`` drops what it assigned. One slot's plain
core (``assigner.BucketAssigner``), the driver's fleet of slot actors (``fleet.py``), the
in-process slots of a write, and the none of a layout scheme all keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dynbucket.actors.allocator import ALONE, Lane
from dynbucket.actors.assigner import NewKeys
from dynbucket.base.columns import HASH, PARTITION
from dynbucket.base.keyhash import slot_of

#: Per partition, the hashes of keys an instant takes out of the table.
Gone = Mapping[str, npt.NDArray[np.int64]]


class Assigners(Protocol):
    """The checkpoint flow of the assigner(s) of a write."""

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None: ...

    def snapshot(
        self,
        checkpoint: int,
        latest_successful: int,
        new_keys: NewKeys | None = None,
    ) -> Any: ...

    def abort(self, checkpoint: int) -> int: ...

    def leave(self, checkpoint: int, gone: Gone) -> None:
        """Notes keys ``checkpoint`` takes out of the table (records marked as deletes:
        keys deleted, or taken as new and never written): they leave the caches, and
        their room is free, when it commits; an abort keeps them (each slot's ``locate``)."""
        ...


def by_slot(gone: Gone, num_slots: int) -> dict[int, pa.RecordBatch]:
    """``gone`` as each slot's batch of ``_partition`` and ``_hash`` (slot ``pmod(hash,
    N)``), for the slots that have any."""
    parts, hashes = [], []
    for partition, h in gone.items():
        parts.append(np.full(len(h), partition, dtype=object))
        hashes.append(np.asarray(h, np.int64))
    if not hashes:
        return {}
    all_parts, all_hashes = np.concatenate(parts), np.concatenate(hashes)
    slots = slot_of(all_hashes, num_slots)
    out = {}
    for s in np.unique(slots):
        mine = slots == s
        out[int(s)] = pa.RecordBatch.from_arrays(
            [pa.array(all_parts[mine], pa.string()), pa.array(all_hashes[mine])],
            names=[PARTITION, HASH],
        )
    return out


class NoAssigners:
    """The assigners of a bucket scheme that computes buckets (layouts): none (no
    checkpoint to open, no cache to snapshot or abort)."""

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None:
        pass

    def snapshot(
        self,
        checkpoint: int,
        latest_successful: int,
        new_keys: NewKeys | None = None,
    ) -> None:
        pass

    def abort(self, checkpoint: int) -> int:
        return 0

    def leave(self, checkpoint: int, gone: Gone) -> None:
        pass
