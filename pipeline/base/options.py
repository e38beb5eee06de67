"""The options of a table's bucket index, persisted with the table, and the one way options
are persisted.

Three indexes (``engine`` in ``table.json``): :class:`DynamicBucketIndex`
(``dynamic-bucket.*``: assigner actors and a record-level index; plus the number of
assigner slots, the one setting that is a choice of each write, not persisted),
:class:`SimpleBucketIndex` (Hudi's bucket index: a fixed count per partition, grown by
``Table.rescale``) and :class:`ConsistentHashingIndex` (a ring of hash ranges per
partition, split and merged by ``Table.rebalance``). The last two need no assigner: a key's
bucket is computed from the key and the partition's layout (``format/buckets/layouts.py``).

:class:`PersistedOptions` is shared by every options class of a table (the table options
too, ``format/table/options.py``): each field names its key
(``option("dynamic-bucket.max-buckets")``), the key written is the key documented, and a
key that no field names is refused. The module sits at the bottom (``base``) because the
assigner actors read the dynamic index's options.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, TypeAlias, TypeVar

from dynbucket.base.columns import MAX_BUCKET_ID
from dynbucket.base.errors import ConfigError

_KEY = "key"
_O = TypeVar("_O", bound="PersistedOptions")


def option(key: str, default: Any) -> Any:
    """A dataclass field persisted under ``key``."""
    return field(default=default, metadata={_KEY: key})


def option_key(f: Field[Any]) -> str:
    return str(f.metadata[_KEY])


class PersistedOptions:
    """Mixin of frozen option dataclasses whose fields are declared with :func:`option`."""

    @classmethod
    def persisted_fields(cls) -> list[Field[Any]]:
        return [f for f in fields(cls) if _KEY in f.metadata]  # type: ignore[arg-type]

    @classmethod
    def key(cls, name: str) -> str:
        """The persisted key of field ``name`` (for messages)."""
        return next(option_key(f) for f in cls.persisted_fields() if f.name == name)

    def to_properties(self) -> dict[str, str]:
        """The options as persisted properties (options left unset are left out)."""
        return {
            option_key(f): _text(getattr(self, f.name))
            for f in self.persisted_fields()
            if getattr(self, f.name) is not None
        }

    @classmethod
    def from_properties(cls: type[_O], props: Mapping[str, str]) -> _O:
        """Reads options written by :meth:`to_properties`.

        Raises:
            ConfigError: a key no option has, or a value of the wrong kind.
        """
        known = {option_key(f): f for f in cls.persisted_fields()}
        kwargs: dict[str, Any] = {}
        for key, value in props.items():
            f = known.get(key)
            if f is None:
                raise ConfigError(
                    f"unknown option {key}={value!r}; known options: {', '.join(sorted(known))}"
                )
            kwargs[f.name] = _parse(key, value, str(f.type))
        return cls(**kwargs)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parse(key: str, value: str, annotation: str) -> Any:
    if "bool" in annotation:
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{key}={value!r}: must be true or false")
        return value.lower() == "true"
    kind = float if "float" in annotation else int if "int" in annotation else str
    try:
        return kind(value)
    except ValueError as e:
        what = "a number" if kind is float else "an integer"
        raise ConfigError(f"{key}={value!r}: must be {what}") from e


@dataclass(frozen=True)
class DynamicBucketIndex(PersistedOptions):
    """A table's dynamic bucket index: when a bucket is full, how many buckets a partition
    may have (persisted), and how many assigner slots (actors; also each partition's initial
    bucket count) a write uses (not persisted).

    "Full" is measured either in keys (the default) or in bytes of the bucket's file group
    (latest base file plus its deltas); a table chooses one.
    """

    max_keys_per_bucket: int | None = option("dynamic-bucket.max-keys-per-bucket", None)
    """Keys a bucket takes before it is full; default 2,000,000 when ``max_bytes_per_bucket``
    is not set."""
    max_bytes_per_bucket: int | None = option("dynamic-bucket.max-bytes-per-bucket", None)
    """Bytes of a bucket's file group before it is full; excludes ``max_keys_per_bucket``."""
    max_buckets: int | None = option("dynamic-bucket.max-buckets", None)
    """Buckets per partition at most; None: unlimited. Once reached, new keys go to the
    least-filled bucket, over capacity (any number of slots shares them)."""
    bytes_per_key_estimate: int = option("dynamic-bucket.bytes-per-key-estimate", 128)
    """Bytes one key adds to a file group, until the partition's own files tell; only used
    with ``max_bytes_per_bucket``."""
    cache_max_bytes: int | None = option("dynamic-bucket.cache.max-bytes", None)
    """Cache bytes a slot may keep of partitions the proposal's flags would evict (read but
    given no new keys, every mapping committed), least recently used out first; None: the
    flags alone (such a partition bootstraps again at its next touch)."""
    global_index: bool = option("dynamic-bucket.global-index", False)
    """A record key is unique in the whole table, not within its partition (Hudi's global
    record index, with ``hoodie.record.index.update.partition.path``): a record whose
    partition value differs from its key's moves the key there when its ordering value
    wins; a delete or lookup needs only the key. Each slot caches its keys of every
    partition."""

    assigner_slots: int | None = field(default=None, compare=False)
    """Assigner slots of a write; None: Spark's default parallelism. May change between
    writes (the actors are replaced; every key keeps its bucket). Not persisted, and not
    part of the index's identity (two indexes differing only here are equal)."""

    DEFAULT_MAX_KEYS = 2_000_000

    def __post_init__(self) -> None:
        key = DynamicBucketIndex.key
        slots = self.assigner_slots
        if slots is not None and (
            isinstance(slots, bool) or not isinstance(slots, int) or slots < 1
        ):
            raise ConfigError(f"assigner_slots={slots!r}: must be an integer >= 1 (or None)")
        if self.max_keys_per_bucket is not None and self.max_bytes_per_bucket is not None:
            raise ConfigError(
                f"{key('max_keys_per_bucket')}={self.max_keys_per_bucket} and "
                f"{key('max_bytes_per_bucket')}={self.max_bytes_per_bucket} are both set; "
                "a table measures bucket fullness one way: set only one of them"
            )
        if self.max_keys_per_bucket is None and self.max_bytes_per_bucket is None:
            object.__setattr__(self, "max_keys_per_bucket", self.DEFAULT_MAX_KEYS)
        for name in (
            "max_keys_per_bucket",
            "max_bytes_per_bucket",
            "bytes_per_key_estimate",
            "cache_max_bytes",
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{key(name)}={value!r}: must be an integer >= 1")
        if not isinstance(self.global_index, bool):
            raise ConfigError(f"{key('global_index')}={self.global_index!r}: must be True or False")
        if self.global_index and self.cache_max_bytes is not None:
            raise ConfigError(
                f"{key('global_index')}=true and {key('cache_max_bytes')}="
                f"{self.cache_max_bytes}: a global index keeps every key of its slot (a key "
                "may move to any partition), so it evicts nothing; unset cache_max_bytes"
            )
        mb = self.max_buckets
        if mb is not None and (
            isinstance(mb, bool) or not isinstance(mb, int) or not 1 <= mb <= MAX_BUCKET_ID + 1
        ):
            raise ConfigError(
                f"{key('max_buckets')}={mb!r}: must be an integer in 1..{MAX_BUCKET_ID + 1}, "
                "or unset for no limit"
            )

    @property
    def by_bytes(self) -> bool:
        """Whether fullness is measured in file-group bytes (else in keys)."""
        return self.max_bytes_per_bucket is not None

    def persisted(self) -> DynamicBucketIndex:
        """The persisted options alone (the write's slot count dropped)."""
        return replace(self, assigner_slots=None)


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


IndexOptions: TypeAlias = DynamicBucketIndex | SimpleBucketIndex | ConsistentHashingIndex
ENGINES: dict[str, type[IndexOptions]] = {
    DYNAMIC: DynamicBucketIndex,
    SIMPLE: SimpleBucketIndex,
    CONSISTENT: ConsistentHashingIndex,
}


def engine_of(index: IndexOptions) -> str:
    """The ``engine`` name an index is persisted under."""
    names = {cls: name for name, cls in ENGINES.items()}
    return next(names[cls] for cls in type(index).__mro__ if cls in names)


def __getattr__(name: str) -> Any:
    """``DynamicBucketOptions``: the old name of :class:`DynamicBucketIndex`, for one
    release."""
    return deprecated_alias(__name__, name)


def deprecated_alias(module: str, name: str) -> Any:
    """The class an old name of this module's stands for, with a DeprecationWarning
    (every module that exported the name answers with this)."""
    if name == "DynamicBucketOptions":
        warnings.warn(
            "DynamicBucketOptions is now DynamicBucketIndex (one class: the persisted "
            "dynamic-bucket.* options and the write's assigner_slots); the old name goes in "
            "the next release",
            DeprecationWarning,
            stacklevel=3,
        )
        return DynamicBucketIndex
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
