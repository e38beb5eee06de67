"""The dynamic bucket assigner: plain-Python cores and the thin Ray actor over them."""

from dynbucket.actors.assigner import AssignerStats, BucketAssigner, IndexSource
from dynbucket.actors.options import DynamicBucketOptions
from dynbucket.actors.partition_index import PartitionLoad

__all__ = [
    "AssignerStats",
    "BucketAssigner",
    "DynamicBucketOptions",
    "IndexSource",
    "PartitionLoad",
]
