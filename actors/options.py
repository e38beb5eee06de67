"""Options of the dynamic bucket index, persisted with the table as ``dynamic-bucket.*``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from dynbucket.actors.cache import MAX_BUCKET_ID
from dynbucket.pipeline.errors import ConfigError

_PREFIX = "dynamic-bucket."


def _kebab(name: str) -> str:
    return _PREFIX + name.replace("_", "-")


@dataclass(frozen=True)
class DynamicBucketOptions:
    """When a bucket is full, and how many buckets a partition may have.

    "Full" is measured either in keys (the default) or in bytes of the bucket's file group
    (latest base file plus its deltas); a table chooses one.
    """

    max_keys_per_bucket: int | None = None
    """Keys a bucket takes before it is full (``dynamic-bucket.max-keys-per-bucket``);
    default 2,000,000 when ``max_bytes_per_bucket`` is not set."""
    max_bytes_per_bucket: int | None = None
    """Bytes of a bucket's file group before it is full (``dynamic-bucket.max-bytes-per-bucket``);
    excludes ``max_keys_per_bucket``."""
    max_buckets: int | None = None
    """Buckets per partition at most (``dynamic-bucket.max-buckets``); None: unlimited. Once
    reached, new keys of a slot go to its least-filled bucket, over capacity."""
    bytes_per_key_estimate: int = 128
    """Bytes one key adds to a file group, until the partition's own files tell
    (``dynamic-bucket.bytes-per-key-estimate``); only used with ``max_bytes_per_bucket``."""

    DEFAULT_MAX_KEYS = 2_000_000

    def __post_init__(self) -> None:
        if self.max_keys_per_bucket is not None and self.max_bytes_per_bucket is not None:
            raise ConfigError(
                f"{_kebab('max_keys_per_bucket')}={self.max_keys_per_bucket} and "
                f"{_kebab('max_bytes_per_bucket')}={self.max_bytes_per_bucket} are both set; "
                "a table measures bucket fullness one way: set only one of them"
            )
        if self.max_keys_per_bucket is None and self.max_bytes_per_bucket is None:
            object.__setattr__(self, "max_keys_per_bucket", self.DEFAULT_MAX_KEYS)
        for name in ("max_keys_per_bucket", "max_bytes_per_bucket", "bytes_per_key_estimate"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{_kebab(name)}={value!r}: must be an integer >= 1")
        mb = self.max_buckets
        if mb is not None and (
            isinstance(mb, bool) or not isinstance(mb, int) or not 1 <= mb <= MAX_BUCKET_ID + 1
        ):
            raise ConfigError(
                f"{_kebab('max_buckets')}={mb!r}: must be an integer in 1..{MAX_BUCKET_ID + 1}, "
                "or unset for no limit"
            )

    @property
    def by_bytes(self) -> bool:
        """Whether fullness is measured in file-group bytes (else in keys)."""
        return self.max_bytes_per_bucket is not None

    def to_properties(self) -> dict[str, str]:
        """The options as persisted table properties (unset options are left out)."""
        return {
            _kebab(f.name): str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        }

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> DynamicBucketOptions:
        """Reads the ``dynamic-bucket.*`` entries of table properties."""
        known = {_kebab(f.name): f.name for f in fields(cls)}
        kwargs: dict[str, int] = {}
        for key, value in props.items():
            if not key.startswith(_PREFIX):
                continue
            if key not in known:
                raise ConfigError(
                    f"unknown option {key}={value!r}; known: {', '.join(sorted(known))}"
                )
            try:
                kwargs[known[key]] = int(value)
            except ValueError as e:
                raise ConfigError(f"{key}={value!r}: must be an integer") from e
        return cls(**kwargs)
