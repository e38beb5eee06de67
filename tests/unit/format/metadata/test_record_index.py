"""The record index's layouts (``metadata/record_index.py``): group names as Hudi spells
them, a partition read back from its groups' names, and the vectorised group of a key
equal to Hudi's ``mapRecordKeyToFileGroupIndex``."""

from __future__ import annotations

import random

import pytest

from dynbucket.format.metadata.record_index import group_indexes, group_name, group_of, partition_of


def test_global_group_names_carry_no_partition() -> None:
    assert group_name(3) == "record-index-0003-0"
    assert partition_of("record-index-0003-0") is None
    assert partition_of("files-0000-0") is None


@pytest.mark.parametrize(
    ("partition", "escaped"),
    [
        ("test", "test"),  # Hudi's own example: record-index-test-0012-0
        ("day=d0", "day%3Dd0"),
        ("2024/01/15", "2024%2F01%2F15"),
        ("a_b-c.d", "a%5Fb%2Dc%2Ed"),  # no _ or - (file name fields), no . (log names)
        ("0000", "0000"),
        ("100%", "100%25"),
        ("zürich/ü", "zürich%2Fü"),  # Hudi escapes ASCII only
    ],
)
def test_partitioned_group_names_escape_and_read_back(partition: str, escaped: str) -> None:
    name = group_name(12, partition)
    assert name == f"record-index-{escaped}-0012-0"
    assert "_" not in name and "/" not in name
    assert partition_of(name) == partition


def test_java_string_hash_codes() -> None:
    # Java: "k1".hashCode() == 107 * 31 + 49 == 3366; "polygenelubricants".hashCode() ==
    # Integer.MIN_VALUE, whose Math.abs is itself (Hudi takes the abs of the remainder too).
    assert group_of("k1", 10) == 3366 % 10
    assert group_of("polygenelubricants", 10) == 2**31 % 10


def test_vectorised_groups_equal_one_by_one() -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019_-/=é€😀\x00"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(2000)]
    keys += ["polygenelubricants", "k" * 300]
    for count in (1, 2, 10, 7919):
        assert group_indexes(keys, count).tolist() == [group_of(k, count) for k in keys]
    assert group_indexes([], 10).tolist() == []
