"""The checkpoint flow of a write's assigners, as the write skeleton (``write/instant.py``)
drives it: ``begin`` opens the instant as a checkpoint, ``snapshot`` commits it (each slot
adds the write's new keys per bucket), ``abort`` drops what it assigned. One slot's plain
core (``assigner.BucketAssigner``), the driver's fleet of slot actors (``fleet.py``), the
in-process slots of a write, and the none of a layout scheme all keep it.
"""

from __future__ import annotations

from typing import Any, Protocol

from dynbucket.actors.assigner import NewKeys


class Assigners(Protocol):
    """The checkpoint flow of the assigner(s) of a write."""

    def begin(self, checkpoint: int, latest_successful: int) -> None: ...

    def snapshot(
        self,
        checkpoint: int,
        latest_successful: int,
        new_keys: NewKeys | None = None,
    ) -> Any: ...

    def abort(self, checkpoint: int) -> int: ...


class NoAssigners:
    """The assigners of a bucket scheme that computes buckets (layouts): none (no
    checkpoint to open, no cache to snapshot or abort)."""

    def begin(self, checkpoint: int, latest_successful: int) -> None:
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
