"""Requests to S3 that fail halfway (``format/storage/retrying.py``, ``object_store.py``):
through ``tests/faulty_proxy.py`` in front of the S3 test server, which cuts responses
mid-stream and loses responses after the server applied the request. What the table layer
reads is what is there, what it writes is there whole, an exclusive create whose answer
was lost is settled by reading back, and what keeps failing is a ``StorageError``.

The seed of the faults changes per run and is printed (``DYNBUCKET_FAULT_SEED`` repeats
one)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import DynBucketError, StorageError
from dynbucket.format.storage import object_store, retrying
from dynbucket.format.storage.store import TableStore
from tests.faulty_proxy import FaultyProxy
from tests.s3 import BUCKET, S3Server, s3_filesystem


def test_reads_and_writes_through_cut_responses_are_whole(
    proxy: FaultyProxy, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(object_store, "LIST_PAGE", 5)  # listings of several pages
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", s3_filesystem(proxy.endpoint))
    direct = s3_filesystem(s3_server.endpoint)
    table = pa.table({"a": list(range(5000)), "b": [f"v{i}" for i in range(5000)]})
    before = retrying.Counters.made_again()
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
    made_again = retrying.Counters.made_again() - before
    assert made_again > 0  # the faults were met, not missed
    print(f"faults: {proxy.stats()}, requests made again: {made_again}")


def test_a_large_object_cut_short_again_and_again_is_read_on_from_the_cut(
    proxy: FaultyProxy, s3_server: S3Server
) -> None:
    """A 2 MiB object through a network that cuts about one response chunk in fifty:
    read whole from the start each time, nearly every attempt is cut (128 chunks), and
    six in a row fail; read on from each cut, it comes whole."""
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", s3_filesystem(proxy.endpoint))
    path = store.path("big")
    data = bytes(range(256)) * (8 << 10)
    store.write_file(path, data)
    before = (proxy.stats()["cuts"], retrying.Counters.made_again())
    proxy.set_rates(cut_rate=0.02, lose_rate=0)
    for _ in range(20):  # five reads met only 4 cuts once (the proxy's rate is random)
        assert store.read_bytes(path) == data
        if proxy.stats()["cuts"] - before[0] >= 5:
            break
    proxy.set_rates(0, 0)
    assert proxy.stats()["cuts"] - before[0] >= 5  # the reads were cut, and went on
    assert retrying.Counters.made_again() > before[1]


def test_an_exclusive_create_whose_answer_was_lost_is_settled_by_reading_back(
    proxy: FaultyProxy, s3_server: S3Server
) -> None:
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", s3_filesystem(proxy.endpoint))
    path = store.path("lease")
    store.create_exclusive(store.path("probe"), b"probe")  # the store's probe, once
    proxy.set_rates(cut_rate=0, lose_rate=1.0)  # every answer lost: applied, never heard
    with pytest.raises(StorageError, match="no answer"):
        store.create_exclusive(path, b"mine")
    proxy.set_rates(0, 0)
    assert s3_filesystem(s3_server.endpoint).get_file_info(path).size == 4  # applied
    # Asked again, the store refuses the create: the content says it was this writer's.
    assert store.create_exclusive(path, b"mine")
    assert not store.create_exclusive(path, b"theirs")


def test_a_store_that_keeps_failing_raises_a_storage_error(proxy: FaultyProxy) -> None:
    store = TableStore.at(f"s3://{BUCKET}/{uuid.uuid4().hex[:8]}", s3_filesystem(proxy.endpoint))
    store.write_file(store.path("x"), b"x")
    proxy.set_rates(cut_rate=1.0, lose_rate=0)
    with pytest.raises(StorageError, match="failed 6 times") as raised:
        store.read_bytes(store.path("x"))
    assert isinstance(raised.value, DynBucketError) and isinstance(raised.value, OSError)
    proxy.set_rates(0, 0)
