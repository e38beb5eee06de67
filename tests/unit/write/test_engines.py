"""Which tables a Spark write may shuffle by partition before tagging (one Python stage),
and which DataFrames a size limit takes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dynbucket.format.records.timestamp_partitions import TimestampPartitioning
from dynbucket.format.table.spec import TableSpec
from dynbucket.options import ConsistentHashingIndex, DynamicBucketIndex, SimpleBucketIndex
from dynbucket.write.engines import one_stage_fits
from dynbucket.write.spark import within

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("at", pa.int64())])
AT = pa.schema([("id", pa.string()), ("at", pa.int64())])
MILLIS = TimestampPartitioning("EPOCHMILLISECONDS", "yyyy/MM/dd")


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        (TableSpec(SCHEMA, ("id",), ("day",)), True),
        (TableSpec(SCHEMA, ("id",), ("day",), bucket_options=SimpleBucketIndex(4)), True),
        (TableSpec(SCHEMA, ("id",), ("day",), bucket_options=ConsistentHashingIndex(4)), True),
        # one task would hold every row: the two stages write its buckets in parallel
        (TableSpec(SCHEMA, ("id",)), False),
        # a moving key's delete goes to its old partition's group, in another task
        (
            TableSpec(
                SCHEMA, ("id",), ("day",), bucket_options=DynamicBucketIndex(global_index=True)
            ),
            False,
        ),
        # two times of one day are two values of the field: two tasks would write one group
        (TableSpec(AT, ("id",), ("at",), timestamp_partitioning=MILLIS), False),
    ],
)
def test_one_stage_only_where_the_partition_fields_values_name_a_rows_group(
    spec: TableSpec, fits: bool
) -> None:
    assert one_stage_fits(spec) is fits


def test_a_limit_of_zero_takes_no_dataframe_not_even_an_empty_one() -> None:
    assert [within(0, 0), within(None, 8), within(8, 8), within(9, 8), within(0, 8)] == [
        False,
        False,
        True,
        False,
        True,
    ]
