"""One Ray + Spark-on-Ray session shared by every integration test (start-up costs ~20 s)."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any

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


def _slot_actors() -> set[tuple[str, str]]:
    import ray

    if not ray.is_initialized():
        return set()
    return {
        (a["namespace"], a["name"])
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith("dynbucket/")
    }


#: Tests that left slot actors alive, and how many.
LEFT_ALIVE: list[str] = []


@pytest.fixture(autouse=True)
def no_slot_actor_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Stops the slot actors a test left alive: each holds ~350 MB and a share of a core
    until the session ends (a clean-clone run counted 29 of them two thirds through), and
    they starve the tests after it. A table the test dropped unclosed stops its own once
    collected (in a reference cycle it waits for the collector, hence ``gc.collect``); one
    still referenced (a stream's query, a global) is named at the end of the session's
    report: closing it in the test is the fix."""
    if "runtime" not in request.fixturenames:
        yield
        return
    before = _slot_actors()
    yield
    gc.collect()  # a table the test dropped unclosed stops its actors when collected
    left: set[tuple[str, str]] = set()
    deadline = time.monotonic() + 1  # ray.kill returns a moment before the actor is gone
    while time.monotonic() < deadline:
        left = _slot_actors() - before
        if not left:
            return
        time.sleep(0.2)
    import ray

    for namespace, name in left:
        with contextlib.suppress(ValueError):  # gone meanwhile
            ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
    LEFT_ALIVE.append(f"{request.node.nodeid}: {len(left)}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if LEFT_ALIVE:
        terminalreporter.write_sep("-", "slot actors left alive, stopped after the test")
        terminalreporter.write_line("\n".join(LEFT_ALIVE))
