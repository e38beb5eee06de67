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


def _instants(uri: str) -> list[str]:
    from pathlib import Path

    timeline = Path(uri) / ".hoodie" / "timeline"
    return sorted(p.name for p in timeline.iterdir() if p.name[:1].isdigit())


@pytest.mark.parametrize("global_index", [False, True])
def test_what_the_record_index_cannot_name_or_hold_is_refused_before_the_commit_point(
    tmp_path, global_index: bool
) -> None:  # type: ignore[no-untyped-def]
    # A partition value whose record-index file names pass 255 bytes, and a key over an HFile
    # key's 32767 bytes, wedged a version 9 table after its commit point; now refused first.
    import pyarrow as pa

    from dynbucket.base.errors import InvalidInputError, InvalidPartitionValueError
    from dynbucket.options import DynamicBucketIndex, TableOptions
    from dynbucket.table import Table
    from tests.hudi_readers import hudi_read

    schema = pa.schema([("id", pa.string()), ("p", pa.string()), ("v", pa.int64())])
    uri = str(tmp_path / "t")
    index = DynamicBucketIndex(global_index=global_index)
    with Table.create(
        uri, schema, "id", "p", index=index, options=TableOptions(table_version=9)
    ) as t:
        t.upsert(pa.table({"id": ["a"], "p": ["x"], "v": [1]}))
        before = _instants(uri)
        long_value = "y" * 200  # its folder, p=yyy..., fits in 255 bytes
        if not global_index:
            with pytest.raises(InvalidPartitionValueError, match="shorten the partition values"):
                t.upsert(pa.table({"id": ["b"], "p": [long_value], "v": [2]}))
        else:  # the global layout's group names carry no partition
            t.upsert(pa.table({"id": ["b"], "p": [long_value], "v": [2]}))
            before = _instants(uri)
        with pytest.raises(InvalidInputError, match="32767 bytes"):
            t.upsert(pa.table({"id": ["k" * 40_000], "p": ["x"], "v": [3]}))
        assert _instants(uri) == before  # nothing requested
        t.upsert(pa.table({"id": ["c"], "p": ["x"], "v": [4]}))  # the table goes on
        want = {"a", "c"} | ({"b"} if global_index else set())
        assert set(t.to_arrow().column("id").to_pylist()) == want
        assert set(hudi_read(uri).column("id").to_pylist()) == want
        assert t.check().healthy


def test_a_version_6_table_takes_a_long_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from dynbucket.table import Table
    from tests.hudi_readers import hudi_read

    schema = pa.schema([("id", pa.string()), ("p", pa.string())])
    with Table.create(str(tmp_path / "t"), schema, "id", "p") as t:
        t.upsert(pa.table({"id": ["k" * 40_000], "p": ["y" * 200]}))
        assert t.to_arrow().num_rows == 1
        assert hudi_read(t.uri).num_rows == 1


def test_a_lookup_in_a_partition_never_written_finds_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    from dynbucket.options import TableOptions
    from dynbucket.table import Table

    schema = pa.schema([("id", pa.string()), ("p", pa.string())])
    options = TableOptions(table_version=9)
    with Table.create(str(tmp_path / "t"), schema, "id", "p", options=options) as t:
        t.upsert(pa.table({"id": ["a"], "p": ["x"]}))
        assert t.lookup(pa.table({"id": ["a", "b"], "p": ["y", "y"]})).num_rows == 0
        assert t.lookup(pa.table({"id": ["a"], "p": ["x"]})).num_rows == 1
