"""S3's conditional write as ``object_store.ConditionalPut`` uses it, against a fake S3
client: what a store that honours, ignores or refuses ``If-None-Match`` makes of a create.
(The real thing, against an S3 server, is in ``tests/integration/test_s3.py``.)"""

from __future__ import annotations

import io
from typing import Any

import pyarrow.fs as pafs
import pytest
from botocore.exceptions import ClientError

from dynbucket.base.errors import UnsupportedStorageError
from dynbucket.format.storage import object_store
from dynbucket.format.storage.object_store import ConditionalPut


def _error(status: int, code: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


class FakeS3:
    """Objects in a dict; ``honours``: whether ``IfNoneMatch`` is applied; ``status``: an
    answer to every conditional put instead."""

    def __init__(self, honours: bool = True, status: int | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        self.honours = honours
        self.status = status

    def put_object(self, Bucket: str, Key: str, Body: bytes, **kw: Any) -> None:  # noqa: N803
        if self.status is not None:
            raise _error(self.status, "NotImplemented")
        if kw.get("IfNoneMatch") == "*" and self.honours and Key in self.objects:
            raise _error(412, "PreconditionFailed")
        self.objects[Key] = Body

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        if Key not in self.objects:
            raise _error(404, "NoSuchKey")
        data = self.objects[Key]  # as boto3 answers: the body and its Content-Length
        return {"Body": io.BytesIO(data), "ContentLength": len(data)}

    def delete_object(self, Bucket: str, Key: str) -> None:  # noqa: N803
        self.objects.pop(Key, None)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(object_store, "_PROBED", set())

    def make(client: FakeS3) -> ConditionalPut:
        put = ConditionalPut(pafs.S3FileSystem(endpoint_override="127.0.0.1:1", scheme="http"))
        monkeypatch.setattr(put, "_client", lambda: client)
        return put

    return make


def test_of_two_creates_of_one_object_only_the_first_wins(store: Any) -> None:
    s3 = FakeS3()
    put = store(s3)
    assert put.put_if_absent("b/t/lease.1", b"writer-a") is True
    assert put.put_if_absent("b/t/lease.1", b"writer-b") is False
    assert s3.objects == {"t/lease.1": b"writer-a"}


def test_a_retried_create_whose_first_answer_was_lost_is_still_won(store: Any) -> None:
    # The first PUT landed but its answer was lost; the retry is refused with 412. The
    # content (a lease names its writer) shows the object is this creator's.
    s3 = FakeS3()
    s3.objects["t/lease.1"] = b"writer-a"
    assert store(s3).put_if_absent("b/t/lease.1", b"writer-a") is True
    assert store(s3).put_if_absent("b/t/lease.1", b"writer-b") is False
    # Empty content cannot tell: the create counts as lost (the caller picks the next id).
    s3.objects["t/req"] = b""
    assert store(s3).put_if_absent("b/t/req", b"") is False


def test_a_store_that_ignores_the_condition_fails_closed_and_leaves_nothing(store: Any) -> None:
    s3 = FakeS3(honours=False)
    with pytest.raises(UnsupportedStorageError, match="accepted a second create"):
        store(s3).put_if_absent("b/t/.hoodie/.dynbucket/table.json", b"{}")
    assert s3.objects == {}


def test_a_store_that_does_not_implement_the_condition_fails_closed(store: Any) -> None:
    with pytest.raises(UnsupportedStorageError, match=r"127.0.0.1:1 does not honour .* 501"):
        store(FakeS3(status=501)).put_if_absent("b/t/x", b"x")


def test_filesystems_with_no_conditional_write_are_refused() -> None:
    with pytest.raises(UnsupportedStorageError, match="LocalFileSystem offers none"):
        ConditionalPut(pafs.LocalFileSystem())
