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
from tests.seeds import BASE  # noqa: E402

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
    return f"dynbucket: sampled sequences seeded {BASE} (DYNBUCKET_SEED={BASE} repeats them)"


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
