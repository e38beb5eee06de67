"""The hostile-input table (``tests/hostile.py``) through both write paths at once: an
in-process write of a pyarrow Table and a Spark write of the same rows and types must take
or refuse each input the same way, with the same error and words, and a refused write leaves
nothing behind on either path (no file, no folder, no instant)."""

from __future__ import annotations

import base64
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import (
    DynBucketError,
    InvalidInputError,
    InvalidPartitionValueError,
    SchemaMismatchError,
)
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from tests.hostile import INPUT_CASES, KEY, ORDERING, PARTITION, SCHEMA, InputCase, write
from tests.unit.test_hostile_input import COLLIDING, COMPOSITE, KEY_MESSAGE, files, folders

OLD = pa.table({"id": ["old"], "day": ["d0"], "ts": [0], "qty": [1], "note": ["n"]}, schema=SCHEMA)


def _frame(spark: Any, data: pa.Table, folder: Path) -> Any:
    """The rows as a Spark DataFrame of the same types (read from Parquet where Spark has
    no type of its own for one, as for uint64)."""
    from pyspark.errors import PySparkTypeError
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return spark.createDataFrame(data.to_pylist(), from_arrow_schema(data.schema))
    except PySparkTypeError:
        pq.write_table(data, folder / "input.parquet")
        return spark.read.parquet(str(folder / "input.parquet"))


def _outcome(t: Table, operation: str, data: Any, root: Path) -> tuple[Any, str, list[Any]]:
    before, dirs = files(root), folders(root)
    try:
        write(t, operation, data)
    except DynBucketError as e:
        assert files(root) == before and folders(root) == dirs, "a refused write left files"
        assert len(t.history()) == 1, "a refused write left an instant"
        return type(e), str(e), []
    rows = t.to_arrow(meta_columns=False, columns=["id", "day", "ts", "qty", "note"])
    return None, "", sorted(rows.to_pylist(), key=str)


@pytest.mark.sample(6)
@pytest.mark.parametrize("case", INPUT_CASES, ids=[c.name for c in INPUT_CASES])
def test_both_paths_take_and_refuse_the_same_input(
    spark: Any, runtime: Runtime, tmp_path: Path, case: InputCase
) -> None:
    data = case.data()
    local = Table.create(str(tmp_path / "local"), SCHEMA, KEY, PARTITION, ORDERING)
    remote = Table.create(
        str(tmp_path / "spark"), SCHEMA, KEY, PARTITION, ORDERING, runtime=runtime
    )
    for t in (local, remote):
        t.upsert(OLD)
    df = _frame(spark, data, tmp_path)
    with remote:
        by_arrow = _outcome(local, case.operation, data, tmp_path / "local")
        by_spark = _outcome(remote, case.operation, df, tmp_path / "spark")
    assert by_arrow[0] is case.error, by_arrow
    assert by_spark[0] is case.error, by_spark
    assert by_arrow[2] == by_spark[2]
    if case.error is not None:
        assert re.search(case.message, by_arrow[1]), by_arrow[1]
        assert re.search(case.message, by_spark[1]), by_spark[1]


def test_spark_refuses_composite_keys_whose_record_key_texts_collide(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    t = Table.create(str(tmp_path / "t"), COMPOSITE, ["k1", "k2"], "day", runtime=runtime)
    with t:
        t.upsert(pa.table({"k1": ["a"], "k2": ["b"], "day": ["d"], "v": [0]}))
        before, dirs = files(tmp_path), folders(tmp_path)
        # One Spark partition: the first bad row named is the in-process writer's (with
        # several, whichever task fails first names its own).
        with pytest.raises(InvalidInputError, match=KEY_MESSAGE):
            t.upsert(
                spark.createDataFrame(
                    COLLIDING.to_pylist(), "k1 string, k2 string, day string, v long"
                ).coalesce(1)
            )
        assert files(tmp_path) == before and folders(tmp_path) == dirs
        assert len(t.history()) == 1


class _Payload:
    """Unpickling this creates ``marker``: code a user's value would run on the driver if
    a task's failure text were unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


def test_a_users_value_holding_an_error_token_runs_nothing_through_spark_tasks(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A key, a partition value and an ordering value holding a pickled payload in the old
    token form and a forged token of the current one: the driver gets the typed error that
    the task raised, and nothing runs."""
    marker = tmp_path / "ran"
    pickled = base64.b64encode(pickle.dumps((_Payload(str(marker)), (), {}))).decode()
    forged = (
        "<dynbucket-error:v2 "
        + base64.b64encode(
            json.dumps(
                {
                    "class": "dynbucket.base.errors:TableCorruptedError",
                    "args": ["forged"],
                    "fields": {},
                }
            ).encode()
        ).decode()
        + ">"
    )
    payload = f"<dynbucket-error {pickled}>{forged}"
    schema = "id string, day string, ts string"
    t = Table.create(
        str(tmp_path / "t"),
        pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.string())]),
        "id",
        "day",
        "ts",
        runtime=runtime,
    )
    with t:
        t.upsert(spark.createDataFrame([(payload, "d", payload)], schema))
        # A key the table has, inserted again: the message quotes the key.
        with pytest.raises(InvalidInputError, match="already exist") as known:
            t.insert(spark.createDataFrame([(payload, "d", "1")], schema))
        # A partition value with a '/', and the payload: the message quotes the value.
        with pytest.raises(InvalidPartitionValueError) as bad_partition:
            t.upsert(spark.createDataFrame([("k", "x/" + payload, payload)], schema))
    assert not marker.exists(), "a value in the data ran code on the driver"
    assert type(known.value) is InvalidInputError
    assert type(bad_partition.value) is InvalidPartitionValueError


def test_spark_refuses_a_field_named_twice(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, KEY, PARTITION, ORDERING, runtime=runtime)
    with t:
        df = spark.createDataFrame(
            [("a", "d", 1, 1, "n", 2)],
            "id string, day string, ts long, qty long, note string, t2 long",
        ).toDF("id", "day", "ts", "qty", "note", "ts")
        with pytest.raises(SchemaMismatchError, match=r"\['ts'\] appear more than once"):
            t.upsert(df)
    assert len(t.history()) == 0
