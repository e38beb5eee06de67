"""Requests to S3 that fail halfway (``format/storage/retrying.py``, ``object_store.py``):
through ``tests/faulty_proxy.py`` in front of the S3 test server, which cuts responses
mid-stream and loses responses after the server applied the request. What the table layer
reads is what is there, what it writes is there whole, an exclusive create whose answer
was lost is settled by reading back, and what keeps failing is a ``StorageError``.

The seed of the faults changes per run and is printed (``DYNBUCKET_FAULT_SEED`` repeats
one)."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import DynBucketError, StorageError
from dynbucket.format.storage import object_store, retrying
from dynbucket.format.storage.store import TableStore
from dynbucket.table import Table
from tests.faulty_proxy import SEED, FaultyProxy
from tests.hudi_readers import hudi_read
from tests.s3 import BUCKET, S3Server


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultyProxy]:
    print(f"faults seeded {SEED} (DYNBUCKET_FAULT_SEED={SEED} repeats them)")
    p = FaultyProxy(s3_server.endpoint, seed=SEED)
    try:
        yield p
    finally:
        p.stop()


def _fs(endpoint: str) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(endpoint_override=endpoint, access_key="testing",
                             secret_key="testing", region="us-east-1", scheme="http")  # fmt: skip


def test_reads_and_writes_through_cut_responses_are_whole(
    proxy: FaultyProxy, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(object_store, "LIST_PAGE", 5)  # listings of several pages
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", _fs(proxy.endpoint))
    direct = _fs(s3_server.endpoint)
    table = pa.table({"a": list(range(5000)), "b": [f"v{i}" for i in range(5000)]})
    before = retrying.Counters.retried
    proxy.set_rates(cut_rate=0.1, lose_rate=0.03)
    for i in range(12):
        path = store.path(f"f{i}.parquet")
        store.write_parquet(path, table)
        store.write_file(store.path(f"b{i}"), b"x" * (1000 + i))
        # What is there is whole (read without faults) ...
        assert pq.read_table(path, filesystem=direct).equals(table)
        # ... and what is read through the faults is what is there: a cut look-up reads
        # as a file of 0 bytes at the epoch, a cut body as a short read.
        assert store.read_bytes(store.path(f"b{i}")) == b"x" * (1000 + i)
        assert pq.read_table(path, filesystem=store.fs, columns=["b"]).column("b") == table["b"]
        assert store.fs.get_file_info(path).size == direct.get_file_info(path).size
    for _ in range(5):
        assert len(store.list_files(store.root)) == 24
        assert len(store.list_files(store.root, recursive=True)) == 24
    proxy.set_rates(0, 0)
    assert retrying.Counters.retried > before  # the faults were met, not missed
    print(f"faults: {proxy.stats()}, requests made again: {retrying.Counters.retried - before}")


def test_an_exclusive_create_whose_answer_was_lost_is_settled_by_reading_back(
    proxy: FaultyProxy, s3_server: S3Server
) -> None:
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", _fs(proxy.endpoint))
    path = store.path("lease")
    store.create_exclusive(store.path("probe"), b"probe")  # the store's probe, once
    proxy.set_rates(cut_rate=0, lose_rate=1.0)  # every answer lost: applied, never heard
    with pytest.raises(StorageError, match="no answer"):
        store.create_exclusive(path, b"mine")
    proxy.set_rates(0, 0)
    assert _fs(s3_server.endpoint).get_file_info(path).size == 4  # applied
    # Asked again, the store refuses the create: the content says it was this writer's.
    assert store.create_exclusive(path, b"mine")
    assert not store.create_exclusive(path, b"theirs")


def test_a_store_that_keeps_failing_raises_a_storage_error(proxy: FaultyProxy) -> None:
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", _fs(proxy.endpoint))
    store.write_file(store.path("x"), b"x")
    proxy.set_rates(cut_rate=1.0, lose_rate=0)
    with pytest.raises(StorageError, match="failed 6 times") as raised:
        store.read_bytes(store.path("x"))
    assert isinstance(raised.value, DynBucketError) and isinstance(raised.value, OSError)
    proxy.set_rates(0, 0)


@pytest.mark.skipif(
    not os.environ.get("DYNBUCKET_FAULT_WRITES"),
    reason="issue 71, open: passes seeds 1-6 on both versions since cut headers are read "
    "again, not yet proven over many runs; DYNBUCKET_FAULT_WRITES=1 runs it",
)
@pytest.mark.parametrize("version", [6, 9])
def test_writes_through_a_flaky_network_lose_nothing(
    proxy: FaultyProxy, s3_server: S3Server, version: int
) -> None:
    """Upserts through 2% of response chunks cut and some answers lost: a write either
    commits or fails with a DynBucketError; every acknowledged row is there, read
    without faults; the table is healthy and hudi-rs reads it the same."""
    uri = f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}/t"
    schema = pa.schema([("id", pa.string()), ("dt", pa.string()), ("v", pa.int64()),
                        ("ts", pa.int64())])  # fmt: skip
    options = {"hoodie.table.version": version}
    Table.create(uri, schema, "id", "dt", "ts", filesystem=_fs(proxy.endpoint),
                 options=options).close()  # fmt: skip
    rng = random.Random(SEED)
    acked: dict[str, int] = {}
    failures: list[str] = []
    proxy.set_rates(cut_rate=0.02, lose_rate=0.005)
    with Table.open(uri, filesystem=_fs(proxy.endpoint)) as t:
        for i in range(8):
            ids = [f"k{rng.randrange(150)}" for _ in range(40)]
            rows = pa.table({"id": ids, "dt": [f"d{int(k[1:]) % 3}" for k in ids],
                             "v": [i] * 40, "ts": [i] * 40})  # fmt: skip
            try:
                t.upsert(rows)
            except DynBucketError as e:  # anything else fails the test
                failures.append(f"{type(e).__name__}: {e}")
                continue
            acked.update(dict.fromkeys(ids, i))
        t.wait_for_services()
    proxy.set_rates(0, 0)
    print(f"faults: {proxy.stats()}; failed writes: {failures}")
    assert len(failures) <= 2, failures
    with Table.open(uri, filesystem=_fs(s3_server.endpoint)) as t:
        got = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
        lost = {k: (v, got.get(k)) for k, v in acked.items() if got.get(k, -1) < v}
        assert not lost, f"acknowledged and lost (key: acked, read): {lost}"
        assert t.to_arrow().num_rows == len(got)  # one row per key
        report = t.check()
        assert report.healthy, str(report)
        theirs = hudi_read(uri)
        assert {r["id"]: r["v"] for r in theirs.to_pylist()} == got
