"""The options a user gives a table: its bucket index and the table options.

Three indexes (``base/options.py``): :class:`DynamicBucketIndex` (assigner actors and a
record-level index; its ``assigner_slots`` is each write's choice, not persisted),
:class:`SimpleBucketIndex` (Hudi's bucket index: a fixed count per partition, grown by
``Table.rescale``) and :class:`ConsistentHashingIndex` (a ring of hash ranges per
partition, split and merged by ``Table.rebalance``). The table options are
:class:`TableOptions`.
"""

from __future__ import annotations

from typing import Any

from dynbucket.base.options import (
    ConsistentHashingIndex,
    DynamicBucketIndex,
    IndexOptions,
    SimpleBucketIndex,
    deprecated_alias,
)
from dynbucket.format.buckets.regroup import RegroupResult
from dynbucket.format.table.options import TableOptions

__all__ = [
    "ConsistentHashingIndex",
    "DynamicBucketIndex",
    "IndexOptions",
    "RegroupResult",
    "SimpleBucketIndex",
    "TableOptions",
]


def __getattr__(name: str) -> Any:
    """``DynamicBucketOptions``: the old name of :class:`DynamicBucketIndex`, for one
    release."""
    return deprecated_alias(__name__, name)
