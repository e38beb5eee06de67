"""I3 of the dynamic scheme, checked from outside: what each slot added to each bucket in one
write, against the rule its slots split the room by (``actors/allocator.py``, restated here
from ``docs/design.md`` so that the check does not lean on the code it checks).

Slot ``s`` of ``N`` may add to bucket ``b`` at most ``share(C - T_b)`` keys in one instant
(``T_b``: the bucket's committed keys before it), where ``share(R) = R // N + 1`` if
``(s - b) mod N < R mod N``, else ``R // N``; and it puts a key in a bucket that had no
committed key only once it has used its whole share of every bucket that had, and of every
such new id below. A write in lane ``L`` of ``W`` (several writers:
``format/timeline/lanes.py``) does all this among the buckets whose id is ``L`` modulo ``W``
only (the remainder rotating with ``b // W`` for ``b``), and puts no new key elsewhere.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

from dynbucket.base.keyhash import hash_columns, slot_of

#: partition -> bucket -> keys
Counts = dict[str, dict[int, int]]


def share(room: int, bucket: int, slot: int, slots: int) -> int:
    return room // slots + (1 if (slot - bucket) % slots < room % slots else 0)


def added_by_slot(
    partitions: list[str], keys: list[str], buckets: list[int], slots: int
) -> dict[str, dict[int, dict[int, int]]]:
    """partition -> slot -> bucket -> new keys, the slot of each key from its hash (a record
    key of one string field)."""
    out: dict[str, dict[int, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    if not keys:
        return out
    routed = slot_of(hash_columns([pa.array(keys, pa.string())]), slots).tolist()
    for partition, slot, bucket in zip(partitions, routed, buckets, strict=True):
        per = out[partition][slot]
        per[bucket] = per.get(bucket, 0) + 1
    return out


def check_shares(
    before: Counts,
    added: dict[str, dict[int, dict[int, int]]],
    cap: int,
    slots: int,
    lanes: tuple[int, int] = (0, 1),
) -> None:
    """Asserts I3 for one write (the module doc): no slot over its share of any bucket, and a
    bucket opened only once the slot had used every share before it, in the write's lane."""
    lane, width = lanes
    for partition, per_slot in added.items():
        old = {b: n for b, n in before.get(partition, {}).items() if n > 0 and b % width == lane}
        for slot, buckets in per_slot.items():
            assert all(b % width == lane for b in buckets), (partition, slot, buckets, lanes)
            for b, n in buckets.items():
                assert n <= share(max(cap - old.get(b, 0), 0), b // width, slot, slots), (
                    partition,
                    slot,
                    b,
                    buckets,
                    old,
                )
            opened = [b for b in buckets if b not in old]
            if not opened:
                continue
            for b, n in old.items():
                assert buckets.get(b, 0) == share(max(cap - n, 0), b // width, slot, slots), (
                    partition,
                    slot,
                    b,
                    buckets,
                    old,
                )
            for b in range(lane, max(opened), width):
                if b not in old:
                    assert buckets.get(b, 0) == share(cap, b // width, slot, slots), (
                        partition,
                        slot,
                        b,
                        buckets,
                        old,
                    )
