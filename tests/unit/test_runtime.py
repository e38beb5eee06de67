"""The runtime's plain parts: Java detection, JVM options, config validation (no Ray/Spark)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dynbucket.base.errors import ConfigError, JavaNotFoundError
from dynbucket.runtime import (
    JDK17_OPEN_PACKAGES,
    RuntimeConfig,
    find_java,
    jdk_java_options,
    parse_java_major,
)


def test_no_java_is_a_clear_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError, match="openjdk-17-jre-headless"):
        find_java({"PATH": str(tmp_path)})


def test_broken_java_home_is_named(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError, match=f"JAVA_HOME='{tmp_path}'"):
        find_java({"JAVA_HOME": str(tmp_path), "PATH": ""})


def test_java_on_path_is_found_with_its_major_version(tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert find_java({"PATH": str(tmp_path)}) == (str(fake), 17)


@pytest.mark.parametrize(
    ("text", "major"),
    [('openjdk version "17.0.15" 2025-04-15', 17), ('java version "1.8.0_392"', 8),
     ('openjdk version "11.0.2" 2019-01-15', 11), ('openjdk version "21" 2023-09-19', 21)],
)  # fmt: skip
def test_parse_java_major(text: str, major: int) -> None:
    assert parse_java_major(text) == major


def test_jvm_options_open_every_package_the_design_lists() -> None:
    opts = jdk_java_options().split()
    for pkg in ("java.lang", "java.nio", "sun.nio.ch", "jdk.internal.misc", "sun.util.calendar"):
        assert f"--add-opens=java.base/{pkg}=ALL-UNNAMED" in opts
    assert "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED" in opts
    assert len(JDK17_OPEN_PACKAGES) == len(set(JDK17_OPEN_PACKAGES)) == 20


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("executors", 0, "executors=0"), ("executor_memory", "4 GB", "executor_memory='4 GB'"),
     ("num_cpus", -2, "num_cpus=-2"), ("object_store_memory", 1000, "75 MiB"),
     ("driver_write_max_bytes", -1, "driver_write_max_bytes=-1: must be an integer >= 0"),
     ("driver_write_max_bytes", "8m", "driver_write_max_bytes='8m'"),
     ("driver_write_max_bytes", True, "driver_write_max_bytes=True"),
     ("driver_read_max_bytes", -5, "driver_read_max_bytes=-5: must be an integer >= 0"),
     ("executor_placement", "spread", "executor_placement=.spread.: must be None or one of")],
)  # fmt: skip
def test_bad_runtime_config_names_field_and_value(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RuntimeConfig(**{field: value})  # type: ignore[arg-type]


def test_runtime_config_spark_conf_is_frozen() -> None:
    cfg = RuntimeConfig(spark_conf={"spark.a": "1"})
    with pytest.raises(TypeError):
        cfg.spark_conf["spark.b"] = "2"  # type: ignore[index]
    assert os.environ.get("DYNBUCKET_UNUSED") is None
