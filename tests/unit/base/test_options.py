"""Persisted options: the key written is the key documented, values round-trip, and every
options class refuses a key it does not know in the same way."""

from __future__ import annotations

import pytest

from dynbucket.base.errors import ConfigError
from dynbucket.base.options import DynamicBucketIndex
from dynbucket.format.table.options import TableOptions


def test_keys_are_the_documented_ones() -> None:
    assert sorted(TableOptions().to_properties()) == [
        "cleaner.commits-retained",
        "compaction.log-size-ratio",
        "concurrency.conflict-retries",
        "heartbeat.expiry-seconds",
        "hoodie.allow.empty.commit",
        "hoodie.archive.automatic",
        "hoodie.clean.automatic",
        "hoodie.clean.max.commits",
        "hoodie.compact.inline",
        "hoodie.compact.inline.max.delta.commits",
        "hoodie.compaction.target.io",
        "hoodie.datasource.compaction.async.enable",
        "hoodie.keep.max.commits",
        "hoodie.keep.min.commits",
        "hoodie.log.compaction.enable",
        "hoodie.populate.meta.fields",
        "hoodie.table.type",
        "hoodie.table.version",
        "hoodie.write.concurrency.mode",
        "hoodie.write.set.null.for.missing.columns",
        "index.compaction.automatic",
        "index.compaction.delta-size-ratio",
        "index.compaction.min-files",
        "lock.commit-lease-seconds",
        "lock.lease-seconds",
        "lock.wait-seconds",
        "metadata.compaction.automatic",
        "schema.evolve-on-write",
    ]
    # Only Hudi's table properties go to hoodie.properties; the services' options (Hudi's
    # write options) stay with dynbucket's definition.
    assert TableOptions(populate_meta_fields=False).hudi_properties() == {
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.version": "6",
    }
    assert "hoodie.keep.min.commits" in TableOptions().own_properties()
    assert sorted(DynamicBucketIndex(max_buckets=9).to_properties()) == [
        "dynamic-bucket.bytes-per-key-estimate",
        "dynamic-bucket.global-index",
        "dynamic-bucket.max-buckets",
        "dynamic-bucket.max-keys-per-bucket",
    ]
    assert (
        "dynamic-bucket.cache.max-bytes"
        in DynamicBucketIndex(cache_max_bytes=1 << 20).to_properties()
    )


@pytest.mark.parametrize(
    "options",
    [
        TableOptions(
            cleaner_commits_retained=3,
            index_compaction_min_files=2,
            lock_lease_seconds=1.5,
            table_type="COPY_ON_WRITE",
            populate_meta_fields=False,
        ),
        DynamicBucketIndex(max_bytes_per_bucket=10_000, max_buckets=7, cache_max_bytes=64 << 20),
    ],
)
def test_options_round_trip(options: TableOptions | DynamicBucketIndex) -> None:
    assert type(options).from_properties(options.to_properties()) == options


@pytest.mark.parametrize("cls", [TableOptions, DynamicBucketIndex])
def test_an_unknown_key_is_refused_naming_the_known_ones(cls: type) -> None:
    with pytest.raises(ConfigError, match=r"unknown option index\.compaction-min-files='8'"):
        cls.from_properties({"index.compaction-min-files": "8"})


def test_a_value_of_the_wrong_kind_names_the_key() -> None:
    with pytest.raises(ConfigError, match="lock.lease-seconds='soon': must be a number"):
        TableOptions.from_properties({"lock.lease-seconds": "soon"})
    with pytest.raises(ConfigError, match="hoodie.populate.meta.fields='yes': must be true or"):
        TableOptions.from_properties({"hoodie.populate.meta.fields": "yes"})
    with pytest.raises(ConfigError, match=r"hoodie.table.type='MOR': must be one of"):
        TableOptions(table_type="MOR")


def test_the_index_of_a_table_persists_only_the_bucket_options() -> None:
    index = DynamicBucketIndex(assigner_slots=4, max_keys_per_bucket=10)
    assert index.to_properties() == DynamicBucketIndex(max_keys_per_bucket=10).to_properties()
    assert index.persisted() == DynamicBucketIndex(max_keys_per_bucket=10)
    assert index.persisted().assigner_slots is None
    with pytest.raises(ConfigError, match="assigner_slots=0"):
        DynamicBucketIndex(assigner_slots=0)
    with pytest.raises(ConfigError, match="dynamic-bucket.cache.max-bytes=0: must be an integer"):
        DynamicBucketIndex(cache_max_bytes=0)
    with pytest.raises(ConfigError, match="dynamic-bucket.max-buckets=0"):
        DynamicBucketIndex(max_buckets=0)


def test_the_old_name_of_the_dynamic_index_still_imports_and_warns() -> None:
    import dynbucket.actors
    import dynbucket.options

    for module in (dynbucket.options, dynbucket.actors):
        with pytest.warns(
            DeprecationWarning, match="DynamicBucketOptions is now DynamicBucketIndex"
        ):
            old = module.DynamicBucketOptions
        assert old is DynamicBucketIndex
        assert old(max_keys_per_bucket=3) == DynamicBucketIndex(max_keys_per_bucket=3)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchIndex'"):
        dynbucket.options.NoSuchIndex  # noqa: B018
