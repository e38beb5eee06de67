"""Lanes: writers beside each other fill different buckets, so their new keys do not collide.

With several writers (``OPTIMISTIC_CONCURRENCY_CONTROL``) a commit conflicts with any write
completed beside it that put new keys into a bucket it put new keys into (I3: each filled
the room it counted from the same committed count; ``conflicts.py`` step 3). Fill-first
buckets made two writers into one partition fill the same open bucket nearly every write,
so about half their writes were written again. A lane keeps them apart:

* each writer (one per table handle and path: ``LocalWriter``, ``SparkWriter``) holds a
  lane number ``L`` for as long as it lives, named in the plan of each instant it begins
  (``lane``, ``writer``), so that writers beginning later see it;
* at each begin, under the commit lease (begins are serialised), the writer reads the
  lanes of the other live writers' pending instants, keeps its own unless a live writer
  holds it, else takes the smallest free one; ``W`` is one more than the highest lane it
  knows alive, counting lanes seen within the last ``heartbeat.expiry-seconds``, on a
  pending instant, on a data write completed within that time (by the time its id names),
  or on a commit its own commit checked (a writer between two writes has no pending
  instant: forgetting it at once would make the other fill its buckets whenever it begins
  in that gap; and a writer whose first write begins in that gap, knowing it only from
  pending instants, took its lane: four writers' first writes collided so);
* the assigners put new keys only into buckets whose id is ``L`` modulo ``W``
  (``actors/allocator.py``): buckets with room first, then new ids of the lane.

Lanes only steer: capacity stays exact by the commit-time check, which is unchanged, so two
writers that disagree for a moment (one began before the other took its lane) at worst
conflict and run again, as before. A writer killed holding a lane keeps its buckets from
the others for ``heartbeat.expiry-seconds`` at most; its room returns then. One writer
alone has ``W == 1``: every bucket, as without lanes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: One writer alone: lane 0 of 1, every bucket.
ALONE = (0, 1)
#: Completed data writes a begin looks at the lanes of, at most (the newest: a writer's
#: first begin on a busy table reads no more than these under the lease).
LOOK_MAX = 16


@dataclass
class Lanes:
    """One writer's lane and what it saw of the others' (the module doc).

    Not thread-safe: a writer begins one instant at a time."""

    expiry_seconds: float
    """How long a lane seen on another writer's pending instant counts as alive."""
    writer: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    lane: int | None = None
    seen: dict[int, float] = field(default_factory=dict)
    """Another writer's lane -> when (monotonic) it was last seen on a live instant."""
    looked: str | None = None
    """The newest completed data write whose lane this writer looked at (``to_look_at``)."""

    def choose(self, live: Mapping[int, str], now: float | None = None) -> tuple[int, int]:
        """``(L, W)`` for the instant this writer begins, given the lanes of the other live
        writers' pending instants (lane -> writer).

        1. Note the lanes seen now; forget those not seen for ``expiry_seconds``.
        2. Keep this writer's lane unless another live writer holds it; else take the
           smallest lane no live or recently seen writer holds.
        3. ``W``: one more than the highest lane alive or seen recently, this one's
           included.
        """
        now = time.monotonic() if now is None else now
        others = {lane: w for lane, w in live.items() if w != self.writer}
        for lane in others:  # 1.
            self.seen[lane] = now
        self.seen = {k: t for k, t in self.seen.items() if now - t <= self.expiry_seconds}
        if self.lane is None or self.lane in others:  # 2.
            taken = set(self.seen)
            self.lane = next(n for n in range(len(taken) + 1) if n not in taken)
        return self.lane, max([self.lane, *self.seen]) + 1  # 3.

    def to_look_at(self, completed: Sequence[str]) -> list[str]:
        """Of the ids of completed data writes (oldest first), the newest ``LOOK_MAX`` not
        looked at before: each write's lane is read once, by the first begin after it
        completed (then noted with :meth:`saw`, as of its time)."""
        new = [i for i in completed if self.looked is None or i > self.looked]
        if new:
            self.looked = new[-1]
        return new[-LOOK_MAX:]

    def saw(self, lane: int, writer: str, now: float | None = None) -> None:
        """Notes another writer's lane, named by a commit completed beside this writer's."""
        if writer != self.writer:
            self.seen[lane] = time.monotonic() if now is None else now


def plan_fields(lanes: Lanes | None, chosen: tuple[int, int]) -> dict[str, object]:
    """What an instant's plan says of its lane (read by the writers that begin after it)."""
    if lanes is None:
        return {}
    return {"lane": chosen[0], "lanes": chosen[1], "writer": lanes.writer}


def lane_of(plan: Mapping[str, object]) -> tuple[int, str] | None:
    """The lane and writer a pending instant's plan names (None: a writer without lanes)."""
    lane, writer = plan.get("lane"), plan.get("writer")
    if isinstance(lane, int) and not isinstance(lane, bool) and isinstance(writer, str):
        return lane, writer
    return None
