"""The runtime's plain parts: config validation (no Ray/Spark)."""

from __future__ import annotations

import os

import pytest

from dynbucket.base.errors import ConfigError
from dynbucket.runtime import RuntimeConfig


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("executors", 0, "executors=0"),
        ("executor_memory", "4 GB", "executor_memory='4 GB'"),
        ("num_cpus", -2, "num_cpus=-2"),
        ("object_store_memory", 1000, "75 MiB"),
        ("driver_write_max_bytes", -1, "driver_write_max_bytes=-1: must be an integer >= 0"),
        ("driver_write_max_bytes", "8m", "driver_write_max_bytes='8m'"),
        ("driver_write_max_bytes", True, "driver_write_max_bytes=True"),
        ("driver_read_max_bytes", -5, "driver_read_max_bytes=-5: must be an integer >= 0"),
        ("spark_one_stage_max_bytes", -1, "spark_one_stage_max_bytes=-1: .*0 writes in two stages"),
        ("executor_placement", "spread", "executor_placement=.spread.: must be None or one of"),
    ],
)
def test_bad_runtime_config_names_field_and_value(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RuntimeConfig(**{field: value})  # type: ignore[arg-type]


def test_runtime_config_spark_conf_is_frozen() -> None:
    cfg = RuntimeConfig(spark_conf={"spark.a": "1"})
    with pytest.raises(TypeError):
        cfg.spark_conf["spark.b"] = "2"  # type: ignore[index]
    assert os.environ.get("DYNBUCKET_UNUSED") is None
