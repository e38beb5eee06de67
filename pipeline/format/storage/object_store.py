"""Exclusive creation on object stores: S3's conditional write (``If-None-Match: *``).

pyarrow's filesystems write objects but cannot make a write conditional, and an object
store has neither ``O_EXCL`` nor an atomic rename: a check-then-put lets two writers both
"create" a lease or an instant request. S3 (since 2024-08), MinIO and other S3-compatible
stores accept ``PutObject`` with ``If-None-Match: *``: the store itself refuses the second
creator with ``412 Precondition Failed``. This module sends that request through boto3, with
the endpoint, region and credentials of the table's pyarrow ``S3FileSystem``, so both talk to
the same store as the same principal.

A store that does not honour the header (it answers ``501 Not Implemented``, or ignores it)
would make every create look won; dynbucket fails closed instead: the first exclusive create
on a store is followed by a second, conditional put of the same key, which must be refused
(:meth:`ConditionalPut._probe`). Stores other than S3 raise at once.

Deletes go through the same client (one ``DeleteObject``): pyarrow's ``delete_file`` puts a
zero-byte folder object in place of a folder it empties, and a table on S3 has none.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import pyarrow.fs as pafs

from dynbucket.base.errors import StorageError, UnsupportedStorageError
from dynbucket.format.storage.retrying import Counters, again

_CLIENTS: dict[tuple[Any, ...], Any] = {}
_PROBED: set[tuple[Any, ...]] = set()
_LOCK = threading.Lock()
#: Keys per page of a listing (S3's most).
LIST_PAGE = 1000
#: Bytes of a body read at a time, first and most: what a read cut short keeps is whole
#: chunks, so they start small (a small object progresses too) and double (a large one
#: is read in few calls).
READ_CHUNKS = (16 << 10, 1 << 20)


class _CutShort(OSError):
    """A body cut short, with the bytes that came before the cut (``received``)."""

    def __init__(self, message: str, received: bytes) -> None:
        super().__init__(message)
        self.received = received


def s3_options(fs: pafs.FileSystem) -> dict[str, Any]:
    """The options a pyarrow ``S3FileSystem`` was made with (endpoint, region, keys)."""
    reconstruct = fs.__reduce__()
    return dict(reconstruct[1][0])


class ConditionalPut:
    """``put_if_absent`` for the objects of one pyarrow ``S3FileSystem``."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        if not isinstance(fs, pafs.S3FileSystem):
            raise UnsupportedStorageError(
                f"dynbucket needs an exclusive create (a conditional write) for its commits, and "
                f"{type(fs).__name__} offers none it can use; put the table on a local or "
                "shared POSIX filesystem, or on S3 (or an S3-compatible store that honours "
                "If-None-Match)"
            )
        options = s3_options(fs)
        self._key = tuple(sorted((k, str(v)) for k, v in options.items()))
        self._options = options

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Creates ``path`` (``bucket/key``) holding ``data`` unless it exists; returns whether
        this call created it.

        Raises:
            UnsupportedStorageError: the store does not honour ``If-None-Match``.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = path.partition("/")
        client = self._client()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as e:
            status = _status(e)
            if status == 501:
                raise self._unsupported(f"it answered {status}") from e
            if status not in (409, 412):  # 409: another conditional put of it is in flight
                raise StorageError(f"creating {path}: {e}") from e
            # A retry of our own put whose first answer was lost is refused too: content
            # that is ours alone (a lease names its writer) shows who created it.
            return bool(data) and self._content(client, bucket, key) == data
        except (BotoCoreError, OSError) as e:  # no answer (botocore tried again already)
            raise StorageError(f"creating {path}: no answer ({e}); it may exist") from e
        self._probe(bucket, key, data)
        return True

    def put(self, path: str, data: bytes) -> None:
        """Writes ``path`` (``bucket/key``) holding ``data``, in one PUT.

        Raises:
            OSError: no answer, or an error (the caller may make it again: its name is its
                own, so a second PUT writes the same bytes).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = path.partition("/")
        try:
            self._client().put_object(Bucket=bucket, Key=key, Body=data)
        except (BotoCoreError, ClientError) as e:
            raise OSError(f"writing {path}: {e}") from e

    def read(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes of ``path`` from ``offset`` (None: to the end), each body
        checked against its length, made again as ``retrying.again`` says. A body cut
        short is read on from the first byte missing (objects never change once written:
        the rest is of the same object), and a cut after progress is no failed attempt:
        a large object over a flaky network is read, not begun again each time.

        Raises:
            FileNotFoundError: no such object.
            StorageError: attempts in a row brought nothing.
        """
        got = bytearray()

        def rest() -> None:
            want = None if length is None else length - len(got)
            try:
                got.extend(self._get(path, offset + len(got), want))
            except _CutShort as cut:
                got.extend(cut.received)
                raise

        again(f"reading {path}", rest, progress=lambda: len(got))
        return bytes(got)

    def _get(self, path: str, offset: int, length: int | None) -> bytes:
        """One GET of ``length`` bytes from ``offset``; a body cut short raises
        ``_CutShort`` with the bytes that came."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = path.partition("/")
        extra = {}
        if offset or length is not None:
            last = "" if length is None else str(offset + length - 1)
            extra["Range"] = f"bytes={offset}-{last}"
        body = bytearray()
        try:
            response = self._client().get_object(Bucket=bucket, Key=key, **extra)
            stream, size = response["Body"], READ_CHUNKS[0]
            while chunk := stream.read(size):
                body += chunk
                size = min(2 * size, READ_CHUNKS[1])
        except ClientError as e:
            if _status(e) == 404:
                raise FileNotFoundError(f"{path}: no such object") from e
            raise OSError(f"reading {path}: {e}") from e
        except BotoCoreError as e:
            raise _CutShort(f"reading {path}: {e}", bytes(body)) from e
        if "ContentLength" not in response:  # headers cut short: urllib3 only warns
            raise OSError(f"reading {path}: the answer's headers were cut short")
        expected = int(response["ContentLength"])
        if len(body) != expected or (length is not None and len(body) != length):
            raise _CutShort(
                f"read {len(body)} bytes of {path} at {offset}, not {length or expected}",
                bytes(body) if len(body) < expected else b"",
            )
        return bytes(body)

    def list(self, directory: str, recursive: bool) -> list[tuple[str, int | None, float | None]]:
        """The objects under ``directory`` (``bucket/prefix``) as ``(path, size, mtime)``,
        and, unless ``recursive``, its sub-folders as ``(path, None, None)``: every page of
        the listing, each checked whole (a page whose answer was cut short reads as an
        empty page to botocore: its count of keys and its truncation mark must be there).
        Each page is made again on its own, from its continuation token: a listing of many
        pages through a flaky network goes on while its pages come (made again whole, a
        listing of five pages at one failed answer in eight fails half its attempts).

        Raises:
            StorageError: a page failed every attempt (:func:`again`).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = directory.strip("/").partition("/")
        prefix = f"{key}/" if key else ""
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": LIST_PAGE}
        if not recursive:
            request["Delimiter"] = "/"

        def page_of(request: dict[str, Any]) -> dict[str, Any]:
            try:
                page: dict[str, Any] = self._client().list_objects_v2(**request)
            except (BotoCoreError, ClientError) as e:
                raise OSError(f"listing {directory}: {e}") from e
            objects, folders = page.get("Contents", []), page.get("CommonPrefixes", [])
            if "IsTruncated" not in page or page.get("KeyCount") != len(objects) + len(folders):
                raise OSError(f"listing {directory}: a page of the answer was cut short")
            return page

        found: list[tuple[str, int | None, float | None]] = []
        while True:
            page = again(f"listing {directory}", functools.partial(page_of, request))
            for o in page.get("Contents", []):
                path = f"{bucket}/{o['Key']}"
                if o["Key"].endswith("/"):  # a folder marker: the folder, not a file
                    if o["Key"] != prefix:
                        found.append((path.rstrip("/"), None, None))
                    continue
                found.append((path, int(o["Size"]), o["LastModified"].timestamp()))
            found += [
                (f"{bucket}/{f['Prefix'].rstrip('/')}", None, None)
                for f in page.get("CommonPrefixes", [])
            ]
            if not page["IsTruncated"]:
                return found
            request = {**request, "ContinuationToken": page["NextContinuationToken"]}

    def delete(self, path: str) -> None:
        """Deletes ``path`` (``bucket/key``); a key that is not there is no error (as S3)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = path.partition("/")
        try:
            self._client().delete_object(Bucket=bucket, Key=key)
        except (BotoCoreError, ClientError) as e:
            raise StorageError(f"deleting {path}: {e}") from e

    # --- internals -----------------------------------------------------------------------

    def _probe(self, bucket: str, key: str, data: bytes) -> None:
        """Once per store and process: a second conditional put of the key just created must
        be refused, or the store ignores the condition and no create is exclusive."""
        if self._key in _PROBED:
            return
        from botocore.exceptions import ClientError

        try:
            self._client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as e:
            if _status(e) in (412, 409):
                with _LOCK:
                    _PROBED.add(self._key)
                return
            self._client().delete_object(Bucket=bucket, Key=key)
            raise self._unsupported(f"it answered {_status(e)}") from e
        self._client().delete_object(Bucket=bucket, Key=key)  # what failed is not left behind
        raise self._unsupported("it accepted a second create of the same object")

    @staticmethod
    def _content(client: Any, bucket: str, key: str) -> bytes | None:
        """The object's bytes (None: not there), read again when its body is cut short."""
        from botocore.exceptions import BotoCoreError, ClientError

        def get() -> bytes | None:
            try:
                response = client.get_object(Bucket=bucket, Key=key)
                body = bytes(response["Body"].read())
            except ClientError as e:
                if _status(e) == 404:
                    return None
                raise OSError(str(e)) from e
            except BotoCoreError as e:
                raise OSError(str(e)) from e
            if len(body) != int(response.get("ContentLength", -1)):  # -1: headers cut short
                raise OSError(f"read {len(body)} of {response.get('ContentLength')} bytes")
            return body

        return again(f"reading {bucket}/{key}", get)

    def _unsupported(self, why: str) -> UnsupportedStorageError:
        endpoint = self._options.get("endpoint_override") or "AWS S3"
        return UnsupportedStorageError(
            f"the S3 store at {endpoint} does not honour conditional writes (If-None-Match: *; "
            f"{why}); dynbucket needs them so that exactly one of several writers creates a "
            "lease or an instant; use a store that does (AWS S3, MinIO, ...); nothing was "
            "committed"
        )

    def _client(self) -> Any:
        with _LOCK:
            client = _CLIENTS.get(self._key)
            if client is None:
                client = _CLIENTS[self._key] = _make_client(self._options)
        return client


def _make_client(options: dict[str, Any]) -> Any:
    import boto3
    from botocore.config import Config

    endpoint = options.get("endpoint_override") or None
    if endpoint and "://" not in endpoint:
        endpoint = f"{options.get('scheme') or 'https'}://{endpoint}"
    session = boto3.session.Session(
        aws_access_key_id=options.get("access_key") or None,
        aws_secret_access_key=options.get("secret_key") or None,
        aws_session_token=options.get("session_token") or None,
        region_name=options.get("region") or None,
    )
    style = "virtual" if options.get("force_virtual_addressing") else "path"
    config = Config(
        s3={"addressing_style": style} if endpoint else {},
        retries={"max_attempts": 6, "mode": "standard"},
        connect_timeout=10,
        read_timeout=30,
    )
    client = session.client("s3", endpoint_url=endpoint, config=config)
    client.meta.events.register("before-send.s3.*", _no_expect_continue)
    client.meta.events.register("before-call.s3.*", _called)
    return client


def _no_expect_continue(request: Any, **_: Any) -> None:
    """Sends a request's body with its headers. botocore's wait for ``100 Continue``
    loops for ever when the connection closes just after that status line (it reads the
    headers that follow until a blank line, and a closed connection never gives one); the
    objects written here are small. Called once per attempt: counted."""
    request.headers.pop("Expect", None)
    Counters.sent += 1


def _called(**_: Any) -> None:
    """Called once per request, however many attempts botocore makes of it."""
    Counters.called += 1


def _status(error: Any) -> int:
    meta = error.response.get("ResponseMetadata", {})
    return int(meta.get("HTTPStatusCode") or 0)
