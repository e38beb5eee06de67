"""Requests to an object store that fail halfway, made again: a pyarrow filesystem over S3.

Object stores fail requests as networks do: a connection reset mid-body, a response lost
after the server applied the request, a throttled request. pyarrow's ``S3FileSystem``
retries a request that fails before its response starts (the AWS SDK's retry strategy), but
not a body cut short, and a write's error reaches the caller even when the object was
written. Every request the table layer makes through ``TableStore.fs`` goes through
:class:`RetryingHandler` instead, which makes each one again, with backoff and a bound,
when making it again cannot change its outcome:

* reads: an object is read whole with boto3, which checks the body against its length
  (pyarrow's client takes a cut look-up for an empty file); a body cut short is read on
  from the first byte missing (a cut after progress is not a failed attempt);
  a look-up that reads as a file of 0 bytes at the epoch (the AWS SDK's reading of a
  response cut short) is made again;
* writes of whole objects under their own names (a data file, a log, an index delta, a
  timeline file: dynbucket never writes an object twice with different content): the
  bytes are kept until the object is written, and the PUT is made again;
* listings: with boto3 too, every page checked whole (its count of keys and its
  truncation mark), since pyarrow's client takes a page cut short for an empty one;
* deletes, copies and folder markers: idempotent (a delete that finds nothing after its
  first answer was lost is done).

Exclusive creates (the commit point, a lease, an instant's request) are not made here: a
conditional write whose response was lost is settled by reading back what is there
(``object_store.py``). What still fails after the retries raises ``StorageError`` (an
``OSError`` too), naming the request.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket.base.errors import StorageError

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: Attempts of one request, and the first pause between two (doubling each time).
ATTEMPTS = 6
FIRST_PAUSE = 0.05


class Counters:
    """Requests made again, per process (what a test or a bench reports): by :func:`again`
    (``retried``), and by botocore's own retries of the requests ``object_store.py`` sends
    (attempts ``sent`` beyond the requests ``called``)."""

    retried = 0
    sent = 0
    called = 0

    @classmethod
    def made_again(cls) -> int:
        return cls.retried + cls.sent - cls.called


def retrying(fs: pafs.FileSystem) -> pafs.FileSystem:
    """``fs`` with its requests made again as the module doc says (an S3 filesystem; any
    other is returned as it is)."""
    if isinstance(fs, pafs.S3FileSystem):
        return pafs.PyFileSystem(RetryingHandler(_options(fs)))
    return fs


def _options(fs: pafs.S3FileSystem) -> dict[str, Any]:
    """What ``fs`` was made with (its endpoint, region, credentials, ...)."""
    return dict(fs.__reduce__()[1][0])


def _made_once(options: dict[str, Any]) -> pafs.S3FileSystem:
    """An ``S3FileSystem`` of ``options`` that makes each request once: the AWS SDK sends
    a PUT again after a reset with its body already read, which writes an empty object and
    answers success; :func:`again` makes whole requests again instead."""
    return pafs.S3FileSystem(
        **options, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1)
    )


def unwrapped(fs: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem :func:`retrying` wrapped (``fs`` itself when it wraps none)."""
    if isinstance(fs, pafs.PyFileSystem) and isinstance(fs.handler, RetryingHandler):
        return fs.handler.inner
    return fs


def again(
    what: str,
    request: Callable[[], _T],
    gone_is_done: bool = False,
    progress: Callable[[], int] | None = None,
) -> _T:
    """``request()``, made again on an ``OSError`` (``FileNotFoundError`` is an answer:
    raised, or with ``gone_is_done`` taken as done once an attempt may have been applied).
    With ``progress`` (bytes received so far), a failed attempt that received more is
    not counted: a large read over a flaky network goes on while it moves.

    Raises:
        StorageError: every attempt failed; names ``what`` and the last error.
    """
    pause, attempt = FIRST_PAUSE, 0
    received = progress() if progress is not None else 0
    while True:
        try:
            return request()
        except FileNotFoundError:
            if gone_is_done and attempt > 0:
                return None  # type: ignore[return-value]
            raise
        except OSError as e:
            if progress is not None and progress() > received:
                Counters.retried += 1
                received, attempt, pause = progress(), 0, FIRST_PAUSE
                log.debug("%s cut short after %d bytes; reading on", what, received)
                continue
            attempt += 1
            if attempt == ATTEMPTS:
                raise StorageError(
                    f"{what} failed {ATTEMPTS} times, the last with: {e}; the storage (or "
                    "the network to it) keeps failing: check it, then run the write again "
                    "(a write that failed commits nothing, or says it may have committed)"
                ) from e
            Counters.retried += 1
            log.debug("%s failed (%s); trying again", what, e)
            time.sleep(pause)
            pause *= 2


class RetryingHandler(pafs.FileSystemHandler):
    """A pyarrow filesystem handler over an ``S3FileSystem`` (the module doc)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.inner = _made_once(options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RetryingHandler, (self.options,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetryingHandler) and self.inner.equals(other.inner)

    def __hash__(self) -> int:
        return hash(type(self.inner))

    def get_type_name(self) -> str:
        return f"retrying-{self.inner.type_name}"

    def equals(self, other: Any) -> bool:
        return self == other

    def normalize_path(self, path: str) -> str:
        return str(self.inner.normalize_path(path))

    # --- metadata -------------------------------------------------------------------------

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return again(
            f"looking up {paths[:3]}", lambda: _whole_infos(self.inner.get_file_info(paths))
        )

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        # Listed with boto3, each page checked whole: pyarrow's client takes a page whose
        # answer was cut short for an empty one, and a listing that misses a table's file
        # reads as a lost file (or, to a clean, as one to keep).
        base = selector.base_dir.rstrip("/")
        objects = self._objects()
        found = objects.list(base, selector.recursive)  # each page made again on its own
        if not found and not selector.allow_not_found:
            (info,) = self.get_file_info([base])
            if info.type == pafs.FileType.NotFound:
                raise FileNotFoundError(f"{base}: no such folder")
        return _infos(base, found, selector.recursive)

    def create_dir(self, path: str, recursive: bool) -> None:
        again(f"creating {path}", lambda: self.inner.create_dir(path, recursive=recursive))

    def delete_dir(self, path: str) -> None:
        again(f"deleting {path}", lambda: self.inner.delete_dir(path), gone_is_done=True)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        again(
            f"emptying {path}",
            lambda: self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok),
            gone_is_done=True,
        )

    def delete_root_dir_contents(self) -> None:
        raise StorageError("dynbucket never empties a store's root")

    def delete_file(self, path: str) -> None:
        again(f"deleting {path}", lambda: self.inner.delete_file(path), gone_is_done=True)

    def move(self, src: str, dest: str) -> None:
        # Not idempotent (a copy, then a delete of the source): made once.
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        again(f"copying {src}", lambda: self.inner.copy_file(src, dest))

    # --- reading -------------------------------------------------------------------------

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._whole(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        # The whole object in one checked GET: a random-access file of Python's reads
        # ranges by a seek then a read, which the threads of one Parquet scan interleave.
        return pa.BufferReader(self._whole(path))

    def _objects(self) -> Any:
        # Ranges are read with boto3, which checks a body against its length; pyarrow's
        # client looks the object up again for each file it opens.
        from dynbucket.format.storage.object_store import ConditionalPut

        return ConditionalPut(self.inner)

    def _size(self, path: str) -> int:
        (info,) = self.get_file_info([path])
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{path}: no such object")
        return int(info.size or 0)

    def _whole(self, path: str) -> pa.Buffer:
        """The whole object, its bodies checked against their lengths (a body cut short
        is read on from where it was cut)."""
        return pa.py_buffer(self._objects().read(path))

    # --- writing -------------------------------------------------------------------------

    def open_output_stream(self, path: str, metadata: dict[str, str] | None) -> pa.NativeFile:
        return pa.PythonFile(_Upload(self._objects(), path), mode="w")

    def open_append_stream(self, path: str, metadata: dict[str, str] | None) -> pa.NativeFile:
        return self.inner.open_append_stream(path, metadata=metadata)


def _infos(
    base: str, found: list[tuple[str, int | None, float | None]], recursive: bool
) -> list[pafs.FileInfo]:
    """A listing as pyarrow gives one: files, and the folders under ``base`` (those a
    recursive listing passes through, too)."""
    infos, folders = [], set()
    for path, size, mtime in found:
        if size is None:
            folders.add(path)
            continue
        infos.append(pafs.FileInfo(path, pafs.FileType.File, mtime=mtime, size=size))
        if recursive:
            parent = path.rpartition("/")[0]
            while len(parent) > len(base) and parent not in folders:
                folders.add(parent)
                parent = parent.rpartition("/")[0]
    return infos + [pafs.FileInfo(f, pafs.FileType.Directory) for f in sorted(folders)]


def _whole_infos(infos: Any) -> Any:
    """``infos`` (one or a list), unless one is of a response cut short: a HEAD whose
    headers were cut reads as a file of 0 bytes modified at the epoch (the AWS SDK takes
    what it got), which would read as an empty file. Raises ``OSError`` then."""
    for info in infos if isinstance(infos, list) else [infos]:
        if info.type == pafs.FileType.File and (info.mtime is None or info.mtime_ns == 0):
            raise OSError(f"a response about {info.path} was cut short")
    return infos


class _Upload(io.RawIOBase):
    """A whole object's bytes, kept until they are written: one PUT at ``close`` (not
    pyarrow's multipart upload: three requests, each of which may fail), made again when
    it fails (its name is its own: a PUT made twice writes the same bytes)."""

    def __init__(self, objects: Any, path: str) -> None:
        super().__init__()
        self._objects, self._path = objects, path
        self._chunks: list[bytes] = []
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._chunks.append(chunk)
        self._size += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._size

    def close(self) -> None:
        if self.closed:
            return
        body = b"".join(self._chunks)
        self._chunks = []

        def put() -> None:
            self._objects.put(self._path, body)

        try:
            again(f"writing {self._path}", put)
        finally:
            super().close()
