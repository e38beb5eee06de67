"""The bucket scheme answers what its callers would branch on: which scheme options choose,
where a key is unique, which fields find its row, where a lookup looks."""

from __future__ import annotations

import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.base.options import ConsistentHashingIndex, SimpleBucketIndex
from dynbucket.format.buckets.scheme import (
    ConsistentHashing,
    DynamicBuckets,
    GlobalDynamicBuckets,
    SimpleBuckets,
    scheme_of,
)
from dynbucket.options import DynamicBucketIndex

PARTITIONS = ["p=b", "p=a", "p=c"]


@pytest.mark.parametrize(
    ("options", "scheme"),
    [
        (DynamicBucketIndex(), DynamicBuckets),
        (DynamicBucketIndex(global_index=True), GlobalDynamicBuckets),
        (SimpleBucketIndex(num_buckets=4), SimpleBuckets),
        (ConsistentHashingIndex(initial_buckets=4), ConsistentHashing),
    ],
)
def test_the_options_choose_one_scheme(options: object, scheme: type) -> None:
    assert type(scheme_of(options)) is scheme  # type: ignore[arg-type]


def test_a_partition_scoped_scheme_keeps_keys_unique_within_each_partition() -> None:
    scheme = scheme_of(DynamicBucketIndex())
    assert not scheme.keys_move
    assert scheme.key_scope("p=a") == "p=a"
    assert scheme.scopes(PARTITIONS) == [["p=a"], ["p=b"], ["p=c"]]
    assert scheme.identity(("id",), ("p", "id")) == ("id", "p")
    asked: list[str] = []
    assert scheme.lookup_partitions(["p=a"], lambda: asked or ["never asked"]) == ["p=a"]
    scheme.refuse_partial()  # a partial upsert keeps a known key's values: no error


def test_a_global_scheme_keeps_keys_unique_in_the_table() -> None:
    scheme = scheme_of(DynamicBucketIndex(global_index=True))
    assert scheme.keys_move
    assert scheme.key_scope("p=a") == scheme.key_scope("p=b") == ""
    assert scheme.scopes(PARTITIONS) == [["p=a", "p=b", "p=c"]]
    assert scheme.identity(("id",), ("p",)) == ("id",)
    assert scheme.lookup_partitions(["p=a"], lambda: PARTITIONS) == PARTITIONS
    with pytest.raises(InvalidInputError, match="dynamic-bucket.global-index"):
        scheme.refuse_partial()
    assert scheme.unique_where == "in the table"


@pytest.mark.parametrize(
    ("options", "tells", "entries", "numbered"),
    [
        (DynamicBucketIndex(), True, True, False),
        (DynamicBucketIndex(global_index=True), True, True, False),
        (SimpleBucketIndex(num_buckets=4), False, False, True),
        (ConsistentHashingIndex(initial_buckets=4), False, False, True),
    ],
)
def test_each_scheme_says_who_knows_new_keys_whether_entries_are_kept_and_how_groups_number(
    options: object, tells: bool, entries: bool, numbered: bool
) -> None:
    scheme = scheme_of(options)  # type: ignore[arg-type]
    assert scheme.assigner_tells_new_keys is tells
    assert scheme.index_entries is entries
    assert scheme.file_ids_numbered is numbered
    assert (scheme.initial_layouts(("id",)) is None) is entries  # entries or a layout place keys
