"""Fixtures every kind of test may use: the S3 test server (started once per session, only
when a test asks for it)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.links import link_new_modules

link_new_modules()  # before anything imports dynbucket

from tests import s3  # noqa: E402
from tests.faulty_proxy import SEED, FaultyProxy  # noqa: E402
from tests.seeds import BASE, sample  # noqa: E402

# Before any test starts Ray or Spark: their processes inherit the AWS settings.
s3.configure()

# Every JVM the tests start (Spark's driver, RayDP's master and executors, in this process's
# session and in the commands the tests run) lives seconds to minutes on small data: the
# client compiler alone and the serial collector start each a third faster on 2 cores
# (a Spark start and first job, 43 s -> 32 s). A user's own setting is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# The multi-node cluster's tests need a Ray of their own (one per process): ``make test``
# runs them in a second session, with DYNBUCKET_CLUSTER_TESTS=1.
collect_ignore = [] if os.environ.get("DYNBUCKET_CLUSTER_TESTS") else ["cluster"]


def pytest_report_header() -> str:
    return (
        f"dynbucket: sampled sequences and families seeded {BASE} (DYNBUCKET_SEED={BASE} "
        "repeats them; DYNBUCKET_SAMPLE=all runs every case of a family)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sample(keep, family=None): a parametrized family (or the tests naming one `family`: "
        "alternatives that test one thing in ways that cost the same) of which each run takes "
        "`keep` cases, chosen by the run's seed (tests/seeds.py; DYNBUCKET_SAMPLE=all takes "
        "every one)",
    )


@pytest.hookimpl(trylast=True)  # after -k and -m have selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs ``keep`` cases of each family marked ``sample(keep)``, and ``keep`` of the tests
    of each ``sample(keep, family=...)`` (each chosen test with all its cases: a count of
    runs asked for, ``DYNBUCKET_FLAKY_RUNS`` say, is kept). The run's seed chooses; a
    family of at most ``keep`` collected cases or tests (one named on the command line, or
    selected by ``-k``) is never cut."""
    families: dict[str, dict[str, list[pytest.Item]]] = {}
    for item in items:
        marker = item.get_closest_marker("sample")
        if marker is not None and isinstance(item, pytest.Function):
            test = f"{item.module.__name__}::{item.originalname}"
            if family := marker.kwargs.get("family"):
                families.setdefault(family, {}).setdefault(test, []).append(item)
            else:
                families.setdefault(test, {})[item.nodeid] = [item]
    dropped: set[int] = set()
    for family, members in families.items():
        first = next(iter(members.values()))[0]
        keep = first.get_closest_marker("sample").args[0]  # type: ignore[union-attr]
        kept = set(sample(family, list(members), keep))
        dropped |= {id(c) for m, cases in members.items() if m not in kept for c in cases}
    if dropped:
        config.hook.pytest_deselected(items=[i for i in items if id(i) in dropped])
        items[:] = [i for i in items if id(i) not in dropped]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3.S3Server]:
    server = s3.S3Server(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(s3_server: s3.S3Server) -> Iterator[FaultyProxy]:
    """A flaky network in front of the S3 test server, faultless until told
    (``set_rates``), seeded by this run's seed (printed)."""
    print(f"faults seeded {SEED} (DYNBUCKET_FAULT_SEED={SEED} repeats them)")
    p = FaultyProxy(s3_server.endpoint, seed=SEED)
    try:
        yield p
    finally:
        p.stop()
