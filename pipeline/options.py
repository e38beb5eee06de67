"""The options a user gives a table: its bucket index and the table options.

Three indexes: :class:`DynamicBucketIndex` (the persisted :class:`DynamicBucketOptions` plus
the one setting that is a choice of each write, not of the table: the number of assigner
slots), :class:`SimpleBucketIndex` (Hudi's bucket index: a fixed count per partition, grown
by ``Table.rescale``) and :class:`ConsistentHashingIndex` (a ring of hash ranges per
partition, split and merged by ``Table.rebalance``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dynbucket.base.errors import ConfigError
from dynbucket.base.options import DynamicBucketOptions
from dynbucket.format.buckets.options import (
    ConsistentHashingIndex,
    IndexOptions,
    SimpleBucketIndex,
)
from dynbucket.format.buckets.regroup import RegroupResult
from dynbucket.format.table.options import TableOptions

__all__ = [
    "ConsistentHashingIndex",
    "DynamicBucketIndex",
    "DynamicBucketOptions",
    "IndexOptions",
    "RegroupResult",
    "SimpleBucketIndex",
    "TableOptions",
]


@dataclass(frozen=True)
class DynamicBucketIndex(DynamicBucketOptions):
    """A table's dynamic bucket index: when buckets are full (the persisted
    ``dynamic-bucket.*`` options, see :class:`DynamicBucketOptions`), and how many assigner
    slots (actors; also each partition's initial bucket count) a write uses."""

    assigner_slots: int | None = None
    """Assigner slots of a write; None: Spark's default parallelism. May change between
    writes (the actors are replaced; every key keeps its bucket). Not persisted."""

    def __post_init__(self) -> None:
        super().__post_init__()
        slots = self.assigner_slots
        if slots is not None and (
            isinstance(slots, bool) or not isinstance(slots, int) or slots < 1
        ):
            raise ConfigError(f"assigner_slots={slots!r}: must be an integer >= 1 (or None)")
