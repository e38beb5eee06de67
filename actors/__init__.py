"""The dynamic bucket assigner: plain-Python cores and the thin Ray actor over them."""

from typing import Any

from dynbucket.actors.assigner import AssignerStats, BucketAssigner, IndexSource
from dynbucket.actors.partition_index import PartitionLoad
from dynbucket.base.options import DynamicBucketIndex, deprecated_alias

__all__ = [
    "AssignerStats",
    "BucketAssigner",
    "DynamicBucketIndex",
    "IndexSource",
    "PartitionLoad",
]


def __getattr__(name: str) -> Any:
    """``DynamicBucketOptions``: the old name of ``DynamicBucketIndex``, for one release."""
    return deprecated_alias(__name__, name)
