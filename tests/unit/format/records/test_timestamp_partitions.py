"""Partition paths made from a time, as Hudi's TimestampBasedKeyGenerator makes them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dynbucket.base.errors import ConfigError, InvalidPartitionValueError
from dynbucket.format.records.partitioning import partition_paths
from dynbucket.format.records.timestamp_partitions import TimestampPartitioning, java_format


def test_java_patterns_read_as_strftime() -> None:
    assert java_format("yyyy/MM/dd/HH") == "%Y/%m/%d/%H"
    assert java_format("yyyy-MM-dd'T'HH:mm:ss.SSSZ") == "%Y-%m-%dT%H:%M:%S.%f%z"


def test_paths_from_epoch_milliseconds_and_from_text_in_a_zone() -> None:
    millis = TimestampPartitioning("EPOCHMILLISECONDS", "yyyy/MM/dd/HH")
    rows = pa.table({"ts": pa.array([1705315500000, 1705485600000, 1705315500000])})
    assert partition_paths(rows, ["ts"], False, millis).to_pylist() == [
        "2024/01/15/10",
        "2024/01/17/10",
        "2024/01/15/10",
    ]
    assert partition_paths(rows, ["ts"], True, millis)[0].as_py() == "ts=2024/01/15/10"
    text = TimestampPartitioning.from_properties(
        {
            "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH",
            "hoodie.keygen.timebased.timezone": "Asia/Tokyo",
        }
    )
    assert text.timestamp_type == "DATE_STRING"  # Hudi 0.x kept the type with the writer
    rows = pa.table({"ts": ["2023-04-02T12:01:00.123Z"]})
    assert partition_paths(rows, ["ts"], False, text).to_pylist() == ["2023/04/02/21"]


def test_a_value_that_is_no_time_is_refused_by_name() -> None:
    millis = TimestampPartitioning("EPOCHMILLISECONDS", "yyyy/MM/dd")
    with pytest.raises(InvalidPartitionValueError, match="'ts' has value 'soon', not a EPOCH"):
        partition_paths(pa.table({"ts": ["soon"]}), ["ts"], False, millis)
    with pytest.raises(InvalidPartitionValueError, match="'ts' is null in 1 row"):
        partition_paths(pa.table({"ts": pa.array([None], pa.int64())}), ["ts"], False, millis)
    with pytest.raises(ConfigError, match="timestamp.type='SCALAR'"):
        TimestampPartitioning("SCALAR", "yyyy")


def test_an_empty_batch_has_no_partition_paths() -> None:
    """An empty upsert into a partitioned table (it failed on the values' longest path)."""
    empty = pa.table({"day": pa.array([], pa.string()), "ts": pa.array([], pa.int64())})
    assert partition_paths(empty, ["day"]).to_pylist() == []
    millis = TimestampPartitioning("EPOCHMILLISECONDS", "yyyy/MM/dd")
    assert partition_paths(empty, ["ts"], False, millis).to_pylist() == []
