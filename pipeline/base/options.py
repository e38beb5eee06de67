"""Options of the dynamic bucket index, persisted with the table as ``dynamic-bucket.*``.

Also the one way options are persisted (:class:`PersistedOptions`), shared by every options
class of a table: each field names its key (``option("dynamic-bucket.max-buckets")``), the
key written is the key documented, and a key that no field names is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar

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
class DynamicBucketOptions(PersistedOptions):
    """When a bucket is full, and how many buckets a partition may have.

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

    DEFAULT_MAX_KEYS = 2_000_000

    def __post_init__(self) -> None:
        key = DynamicBucketOptions.key
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

    def persisted(self) -> DynamicBucketOptions:
        """These options alone (a subclass adding per-write settings drops them)."""
        return DynamicBucketOptions(
            **{f.name: getattr(self, f.name) for f in DynamicBucketOptions.persisted_fields()}
        )
