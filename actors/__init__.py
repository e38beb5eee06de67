"""The dynamic bucket assigner: plain-Python cores and the thin Ray actor over them."""

from dynbucket.actors.assigner import AssignerStats, BucketAssigner, IndexSource
from dynbucket.actors.partition_index import PartitionLoad
from dynbucket.base.options import DynamicBucketOptions

__all__ = [
    "AssignerStats",
    "BucketAssigner",
    "DynamicBucketOptions",
    "IndexSource",
    "PartitionLoad",
]
