"""A table's root on any pyarrow filesystem, with the few primitives the table layer needs.

Atomicity: on a local filesystem a file is published by writing a temporary name and
renaming it (atomic on POSIX); on object stores (S3) one PUT is atomic by itself, so the
file is written in place and nothing relies on a rename. Exclusive creation is exact on both:
a hard link locally, S3's conditional write (``If-None-Match: *``) on S3
(``object_store.ConditionalPut``); a store that offers neither refuses the write
(``UnsupportedStorageError``) rather than fall back to a check-then-put.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dynbucket.base.threads import shared_pool
from dynbucket.format.storage.object_store import ConditionalPut
from dynbucket.format.storage.retrying import retrying, unwrapped

#: Temporary files of atomic writes (``.<name>.tmp-<id>``); a killed attempt leaves one.
TEMPORARY = re.compile(r"^\..*\.tmp-[0-9a-f]+$")
#: Parts of a name by which Hudi's readers take a file for a log (or an archived timeline)
#: file, whatever follows (``^\.(.+)_(.*)\.(log|archive)\.(\d+)``): a temporary name holds
#: them marked, so that a reader listing a partition mid-write skips the file.
_LOG_MARKS = ((".log.", ".log~."), (".archive.", ".archive~."))


def temporary_name(name: str) -> str:
    """A hidden name for writing the file ``name`` (:data:`TEMPORARY` matches it), which no
    Hudi reader takes for a data file: not ``.parquet`` at the end, no ``.log.<n>``."""
    hidden = name.lstrip(".")
    for mark, marked in _LOG_MARKS:
        hidden = hidden.replace(mark, marked)
    return f".{hidden}.tmp-{uuid.uuid4().hex[:12]}"


def final_name(temporary: str) -> str:
    """The name a temporary file (:func:`temporary_name`) was to be published as, but for
    a leading ``.`` (a log's, which a temporary name does not keep apart)."""
    name = re.sub(r"\.tmp-[0-9a-f]+$", "", temporary).lstrip(".")
    for mark, marked in _LOG_MARKS:
        name = name.replace(marked, mark)
    return name


@dataclass(frozen=True)
class TableStore:
    """The filesystem and root path of one table."""

    fs: pafs.FileSystem
    root: str
    uri: str

    @classmethod
    def at(cls, uri: str, filesystem: pafs.FileSystem | None = None) -> TableStore:
        """Resolves ``uri`` (a local path, ``file://``, ``s3://``, ...) to a store."""
        if filesystem is not None:
            # ``s3://bucket/t`` on a given filesystem is the path ``bucket/t`` on it.
            path = uri.split("://", 1)[1] if "://" in uri else uri
            return cls(retrying(filesystem), path.rstrip("/") or "/", uri)
        if "://" not in uri:
            uri = os.path.abspath(os.path.expanduser(uri))
        fs, path = pafs.FileSystem.from_uri(uri)
        return cls(retrying(fs), path.rstrip("/") or "/", uri)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *[p for p in parts if p])

    # --- reading -------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_file(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.File

    def read_bytes(self, path: str) -> bytes:
        """A whole (small) file. On an object store a read cut short (the connection reset,
        or the process stopped and continued mid-response) is made again
        (``retrying.py``)."""
        with self.fs.open_input_stream(path) as f:
            return bytes(f.read())

    def read_buffer(self, path: str) -> pa.Buffer:
        """A whole file as an Arrow buffer: memory-mapped locally (no copy: the page cache
        is read in place), read in one request elsewhere."""
        if self.is_local:
            with pa.memory_map(path) as f:
                return f.read_buffer()
        with self.fs.open_input_file(path) as f:
            return f.read_buffer()

    def list_files(self, directory: str, recursive: bool = False) -> list[pafs.FileInfo]:
        """Files under ``directory`` (none if it does not exist)."""
        selector = pafs.FileSelector(directory, allow_not_found=True, recursive=recursive)
        return [i for i in self._listed(selector) if i.is_file]

    def list_dirs(self, directory: str) -> list[str]:
        selector = pafs.FileSelector(directory, allow_not_found=True)
        return [i.path for i in self._listed(selector) if i.type == pafs.FileType.Directory]

    def _listed(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        """``selector``'s listing. pyarrow lists a missing folder as empty only when it is
        missing still as it looks again after the failed listing: a folder made in between
        fails it with ``FileNotFoundError`` (another writer's first archival made
        ``.hoodie/.dynbucket/archive`` while a commit's conflict check listed it, and the
        commit failed: the writers model, 2026-12-02). Listed again, it is there."""
        try:
            return list(self.fs.get_file_info(selector))
        except FileNotFoundError:
            return list(self.fs.get_file_info(selector))

    # --- writing -------------------------------------------------------------------------

    def write_atomic(self, path: str, data: bytes, durable: bool = True) -> None:
        """Publishes ``data`` at ``path`` whole or not at all, durably.

        Locally: a hidden temporary file in the same folder, flushed to disk, renamed over
        ``path``, then the folder flushed (so the rename survives a power cut). On object
        stores one PUT is atomic and durable by itself. ``durable`` False: renamed without
        the flushes, for what only says a process is alive (a heartbeat, a lease renewed or
        released, a place in the lease's queue), which a power cut ends anyway: two of
        them in every write, each flush a wait for the disk shared with the other writers.
        """
        if durable or not self.is_local:
            self._publish(path, lambda tmp: self._write_bytes(tmp, data))
            return
        os.makedirs(posixpath.dirname(path), exist_ok=True)
        tmp = self._temporary(path)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _write_bytes(self, path: str, data: bytes | Sequence[bytes]) -> None:
        with self.fs.open_output_stream(path) as f:
            for chunk in [data] if isinstance(data, bytes) else data:
                f.write(chunk)

    def _publish(self, path: str, write: Callable[[str], None]) -> int:
        """Writes ``path`` through ``write(target)``, published at once (a batch of one);
        returns the file's size."""
        with WriteBatch(self) as batch:
            return batch.stage(path, write)

    def create_exclusive(self, path: str, data: bytes, durable: bool = True) -> bool:
        """Creates ``path`` with ``data`` unless it exists; returns whether this call did.

        Locally the content is written under a temporary name first and then hard-linked to
        ``path`` (``link`` fails when ``path`` exists): exactly one of several creators
        wins, and no reader ever sees the file without its content. ``durable``: the file
        and its folder are flushed to disk (not needed where losing the file in a power cut
        is harmless: a lease, an instant's request that its inflight file follows).
        On S3 the object is created by one conditional PUT (``If-None-Match: *``): the
        store refuses every creator but the first. Other filesystems raise
        :class:`UnsupportedStorageError` (fail closed).
        """
        directory = posixpath.dirname(path)
        if not self.is_local:
            return self._conditional().put_if_absent(path, data)
        self.fs.create_dir(directory, recursive=True)
        tmp = self._temporary(path)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if durable:
            _fsync(directory)
        return True

    def _conditional(self) -> ConditionalPut:
        return ConditionalPut(unwrapped(self.fs))

    @staticmethod
    def _temporary(path: str) -> str:
        """A hidden name beside ``path`` for writing it (:data:`TEMPORARY` matches it)."""
        directory, name = posixpath.split(path)
        return posixpath.join(directory, temporary_name(name))

    def remove_empty_dirs(self, directories: Iterable[str]) -> None:
        """Removes each of ``directories`` that is empty, and then its parents that are
        (never the table's root). Object stores have no folders to remove."""
        if not self.is_local:
            return
        for directory in sorted(set(directories), key=len, reverse=True):
            while directory.startswith(self.root + "/"):
                try:
                    os.rmdir(directory)
                except OSError:  # not empty (or already gone): its parents are not empty
                    break
                directory = posixpath.dirname(directory)

    def delete(self, path: str) -> None:
        """Deletes the file at ``path`` if it is there. On S3 one ``DeleteObject``: pyarrow's
        ``delete_file`` leaves a zero-byte folder object behind when the folder empties."""
        if not self.is_local:
            self._conditional().delete(path)
            return
        # Gone already is fine: two cleaners of one plan remove the same files.
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(path)

    def write_parquet(self, path: str, table: pa.Table, **options: object) -> int:
        """Publishes ``table`` at ``path`` whole or not at all, durably; returns its size.

        Two attempts of one Spark task (a retry, a speculative copy) write the same path: on
        a local filesystem each writes a hidden temporary file and renames it, so the path
        always holds one attempt's complete file; on object stores a PUT is atomic already.
        """
        return self._publish(
            path, lambda target: pq.write_table(table, target, filesystem=self.fs, **options)
        )

    def write_file(self, path: str, data: bytes | Sequence[bytes]) -> int:
        """Publishes ``data`` (bytes, or chunks written one after another) at ``path`` (as
        :meth:`write_parquet`); returns its size."""
        return self._publish(path, lambda target: self._write_bytes(target, data))

    def walk(self, directory: str) -> Iterator[pafs.FileInfo]:
        yield from self.list_files(directory, recursive=True)


class FileWriter(Protocol):
    """Where the table layer writes data files: the store itself (each file published as
    it is written) or a :class:`WriteBatch` (all published together)."""

    def write_parquet(self, path: str, table: pa.Table, **options: object) -> int: ...

    def write_file(self, path: str, data: bytes | Sequence[bytes]) -> int: ...


class WriteBatch:
    """Files written together and published at once.

    Each file is written under a hidden temporary name as it comes (threads may write at
    the same time). :meth:`publish` then flushes every one of them to disk at the same
    time, renames each into place and flushes their folders, again at the same time: a
    filesystem commits flushes that wait together in one journal commit, so a batch waits
    for the disk about once rather than twice per file. As with single files, only flushed
    content is ever renamed into place. On object stores a file is written in place (one
    PUT is atomic and durable) and there is nothing left to publish.

    As a context manager, the batch publishes when its block ends, and discards what it
    staged when the block raises.
    """

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self._staged: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> WriteBatch:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            self.discard()
            return
        try:
            self.publish()
        except BaseException:
            self.discard()
            raise

    def write_parquet(self, path: str, table: pa.Table, **options: object) -> int:
        return self.stage(
            path, lambda target: pq.write_table(table, target, filesystem=self.store.fs, **options)
        )

    def write_file(self, path: str, data: bytes | Sequence[bytes]) -> int:
        return self.stage(path, lambda target: self.store._write_bytes(target, data))

    def copy_file(self, source: str, path: str) -> int:
        """Publishes a copy of ``source`` at ``path`` with the batch: locally a hard link
        (files never change once written, so two names of one file are two files; no byte
        is written), else the filesystem's own copy (server-side on S3)."""
        store = self.store

        def copy(target: str) -> None:
            if store.is_local:
                try:
                    os.link(source, target)
                    return
                except OSError:  # another device, or links not supported: copy the bytes
                    pass
            store.fs.copy_file(source, target)

        return self.stage(path, copy)

    def stage(self, path: str, write: Callable[[str], None]) -> int:
        """Writes ``path`` through ``write(target)`` under a temporary name, to be
        published with the batch; returns the file's size."""
        store = self.store
        if not store.is_local:  # no folders to make on an object store: a PUT is enough
            write(path)
            size = store.fs.get_file_info(path).size
            if size is None:  # removed at once (a rollback of a writer that stalled)
                raise FileNotFoundError(f"{path}: gone as soon as it was written")
            return int(size)
        store.fs.create_dir(posixpath.dirname(path), recursive=True)
        tmp = store._temporary(path)
        with self._lock:
            self._staged.append((tmp, path))
        write(tmp)
        return int(store.fs.get_file_info(tmp).size)

    def publish(self) -> None:
        """Flushes, renames into place and flushes the folders of every staged file (what a
        failure leaves staged, :meth:`discard` removes)."""
        staged = self._staged
        if not staged:
            return
        _flush_all([tmp for tmp, _ in staged])
        for tmp, path in staged:
            self.store.fs.move(tmp, path)
        _flush_all(sorted({posixpath.dirname(p) for _, p in staged}))
        self._staged = []

    def discard(self) -> None:
        """Removes what was staged and not published (a failed write)."""
        staged, self._staged = self._staged, []
        for tmp, _ in staged:
            self.store.delete(tmp)


def _flush_all(paths: Sequence[str]) -> None:
    """Flushes ``paths`` to disk, all waiting at once (one journal commit for them all)."""
    if len(paths) <= 1:
        for p in paths:
            _fsync(p)
        return
    # Flushes are leaves (they wait for nothing): one pool serves every writer thread.
    list(shared_pool("flush", 32).map(_fsync, paths))


def _fsync(path: str) -> None:
    """Flushes a local file or folder to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
