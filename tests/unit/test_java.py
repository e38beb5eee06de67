"""Java as Spark needs it: found, its version read, the JVM options of JDK 17 (no Ray,
no Spark)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from dynbucket.base.errors import JavaNotFoundError
from dynbucket.java import JDK17_OPEN_PACKAGES, find_java, jdk_java_options, parse_java_major


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
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "11.0.2" 2019-01-15', 11),
        ('openjdk version "21" 2023-09-19', 21),
    ],
)
def test_parse_java_major(text: str, major: int) -> None:
    assert parse_java_major(text) == major


def test_jvm_options_open_every_package_the_design_lists() -> None:
    opts = jdk_java_options().split()
    for pkg in ("java.lang", "java.nio", "sun.nio.ch", "jdk.internal.misc", "sun.util.calendar"):
        assert f"--add-opens=java.base/{pkg}=ALL-UNNAMED" in opts
    assert "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED" in opts
    assert len(JDK17_OPEN_PACKAGES) == len(set(JDK17_OPEN_PACKAGES)) == 20
