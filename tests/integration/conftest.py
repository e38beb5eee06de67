"""One Ray + Spark-on-Ray session shared by every integration test (start-up costs ~20 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dynbucket.runtime import Runtime


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def runtime() -> Iterator[Runtime]:
    # Spark writes go through Spark tasks, the path these tests are about; the driver path
    # of small DataFrames (the default) has tests of its own (write/test_driver.py) and a
    # third of the model workloads. Verbose: Ray's, Spark's and the JVM's output in the
    # suite's log, beside the failure it may explain.
    with Runtime(driver_write_max_bytes=0, driver_read_max_bytes=0, verbose=True) as rt:
        assert rt.spark is not None  # Spark starts beside the tests: all of it up first
        yield rt


@pytest.fixture(scope="session")
def spark(runtime: Runtime):
    return runtime.spark
