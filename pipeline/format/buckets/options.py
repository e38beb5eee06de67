"""The definitions of the stateless bucket schemes, persisted with the table.

A table's index is one of three (``engine`` in ``table.json``): ``dynamic-bucket``
(:class:`~dynbucket.base.options.DynamicBucketOptions`, assigner actors and a record-level
index), ``simple-bucket`` (:class:`SimpleBucketIndex`) and ``consistent-hashing``
(:class:`ConsistentHashingIndex`). The last two need no assigner: a key's bucket is computed
from the key and the partition's layout (``layouts.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from dynbucket.base.columns import MAX_BUCKET_ID
from dynbucket.base.errors import ConfigError
from dynbucket.base.options import DynamicBucketOptions, PersistedOptions, option

DYNAMIC = "dynamic-bucket"
SIMPLE = "simple-bucket"
CONSISTENT = "consistent-hashing"
_PARTITION_BUCKETS = "simple-bucket.partition-buckets"


def _count(key: str, value: object, low: int = 1) -> None:
    top = MAX_BUCKET_ID + 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
        raise ConfigError(f"{key}={value!r}: must be an integer in {low}..{MAX_BUCKET_ID + 1}")


@dataclass(frozen=True)
class SimpleBucketIndex(PersistedOptions):
    """Hudi's simple bucket index: a fixed number of buckets per partition; a key's bucket
    is Hudi's hash of its key field values mod that number, so Hudi's own writer
    (``hoodie.index.type=BUCKET``, the same count) puts every key where dynbucket does.

    ``partition_buckets`` sets other counts for some partitions (Hudi's partition-level
    bucket index): the first regular expression that matches the whole partition path
    gives its count.
    """

    num_buckets: int = option("simple-bucket.num-buckets", 4)
    """Buckets of a partition no rule of ``partition_buckets`` matches."""
    partition_buckets: Any = field(default=(), metadata={})
    """``{regex: count}`` (or pairs, in order): the first regex matching a partition path
    sets its count."""

    def __post_init__(self) -> None:
        _count(self.key("num_buckets"), self.num_buckets)
        given = self.partition_buckets
        pairs = list(given.items()) if isinstance(given, Mapping) else list(given or ())
        rules = []
        for pair in pairs:
            try:
                pattern, n = pair
            except (TypeError, ValueError) as e:
                raise ConfigError(
                    f"{_PARTITION_BUCKETS}: {pair!r} is not a (regex, count) pair; give a dict "
                    "like {'region=eu.*': 16}"
                ) from e
            try:
                re.compile(str(pattern))
            except re.error as e:
                raise ConfigError(
                    f"{_PARTITION_BUCKETS}: {pattern!r} is not a regular expression ({e}); "
                    "fix the pattern"
                ) from e
            _count(f"{_PARTITION_BUCKETS}[{pattern!r}]", n)
            rules.append((str(pattern), int(n)))
        object.__setattr__(self, "partition_buckets", tuple(rules))

    def buckets_of(self, partition: str) -> int:
        """The count a partition starts with: the first matching rule's, else
        ``num_buckets``."""
        for pattern, n in self.partition_buckets:
            if re.fullmatch(pattern, partition):
                return int(n)
        return self.num_buckets

    def to_properties(self) -> dict[str, str]:
        props = super().to_properties()
        if self.partition_buckets:
            props[_PARTITION_BUCKETS] = json.dumps([list(p) for p in self.partition_buckets])
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> SimpleBucketIndex:
        props = dict(props)
        rules = props.pop(_PARTITION_BUCKETS, None)
        base = super().from_properties(props)
        if rules is None:
            return base
        try:
            pairs = [tuple(p) for p in json.loads(rules)]
        except ValueError as e:
            raise ConfigError(f"{_PARTITION_BUCKETS}={rules!r}: not a JSON list of pairs") from e
        return cls(num_buckets=base.num_buckets, partition_buckets=pairs)

    def persisted(self) -> SimpleBucketIndex:
        return self


@dataclass(frozen=True)
class ConsistentHashingIndex(PersistedOptions):
    """Consistent hashing: per partition, a ring of ranges of a 32-bit hash of the key (the
    low 32 bits of its ``xxhash64``), each range one bucket. ``Table.rebalance()`` splits a
    bucket over ``max_keys_per_bucket`` into two ranges and merges two adjacent buckets under
    ``min_keys_per_bucket`` into one."""

    initial_buckets: int = option("consistent-hashing.initial-buckets", 4)
    """Ranges of a partition's ring before its first rebalance (equal widths)."""
    max_keys_per_bucket: int = option("consistent-hashing.max-keys-per-bucket", 2_000_000)
    """A rebalance splits a bucket holding more keys."""
    min_keys_per_bucket: int = option("consistent-hashing.min-keys-per-bucket", 400_000)
    """A rebalance merges two adjacent buckets that both hold fewer keys (and together at
    most ``max_keys_per_bucket``)."""

    def __post_init__(self) -> None:
        key = ConsistentHashingIndex.key
        _count(key("initial_buckets"), self.initial_buckets)
        for name in ("max_keys_per_bucket", "min_keys_per_bucket"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{key(name)}={value!r}: must be an integer >= 0")
        if self.max_keys_per_bucket < 2:
            raise ConfigError(
                f"{key('max_keys_per_bucket')}={self.max_keys_per_bucket!r}: "
                "must be at least 2 (a split halves a bucket)"
            )
        if self.min_keys_per_bucket * 2 > self.max_keys_per_bucket:
            raise ConfigError(
                f"{key('min_keys_per_bucket')}={self.min_keys_per_bucket} is more than half "
                f"of {key('max_keys_per_bucket')}={self.max_keys_per_bucket}: the halves of a "
                "split would be merged again; lower the minimum"
            )

    def persisted(self) -> ConsistentHashingIndex:
        return self


IndexOptions: TypeAlias = DynamicBucketOptions | SimpleBucketIndex | ConsistentHashingIndex
ENGINES: dict[str, type[IndexOptions]] = {
    DYNAMIC: DynamicBucketOptions,
    SIMPLE: SimpleBucketIndex,
    CONSISTENT: ConsistentHashingIndex,
}


def engine_of(index: IndexOptions) -> str:
    """The ``engine`` name an index is persisted under."""
    if isinstance(index, SimpleBucketIndex):
        return SIMPLE
    if isinstance(index, ConsistentHashingIndex):
        return CONSISTENT
    return DYNAMIC
