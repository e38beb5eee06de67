"""A table's root on any pyarrow filesystem, with the few primitives the table layer needs.

Atomicity: on a local filesystem a file is published by writing a temporary name and
renaming it (atomic on POSIX); on object stores (S3, GCS) one PUT is atomic by itself, so the
file is written in place. Exclusive creation is exact on local filesystems (``O_EXCL``); on
object stores it is a write followed by a read-back check (see ``create_exclusive``).
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


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
            return cls(filesystem, uri.rstrip("/"), uri)
        if "://" not in uri:
            uri = os.path.abspath(os.path.expanduser(uri))
        fs, path = pafs.FileSystem.from_uri(uri)
        return cls(fs, path.rstrip("/") or "/", uri)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *[p for p in parts if p])

    # --- reading -------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as f:
            return bytes(f.read())

    def list_files(self, directory: str, recursive: bool = False) -> list[pafs.FileInfo]:
        """Files under ``directory`` (none if it does not exist)."""
        selector = pafs.FileSelector(directory, allow_not_found=True, recursive=recursive)
        return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    def list_dirs(self, directory: str) -> list[str]:
        selector = pafs.FileSelector(directory, allow_not_found=True)
        return [
            i.path for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.Directory
        ]

    # --- writing -------------------------------------------------------------------------

    def write_atomic(self, path: str, data: bytes) -> None:
        """Publishes ``data`` at ``path`` whole or not at all."""
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        if not self.is_local:
            with self.fs.open_output_stream(path) as f:
                f.write(data)
            return
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, path)
        finally:
            if self.exists(tmp):
                self.fs.delete_file(tmp)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Creates ``path`` with ``data`` unless it exists; returns whether this call did.

        Exact on local filesystems (``O_CREAT | O_EXCL``). Object stores offer no exclusive
        create through pyarrow: the file is written when absent and read back, which narrows
        but does not close the race between two creators.
        """
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        if self.is_local:
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            return True
        if self.exists(path):
            return False
        with self.fs.open_output_stream(path) as f:
            f.write(data)
        return self.read_bytes(path) == data

    def delete(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_file(path)

    def write_parquet(self, path: str, table: pa.Table, **options: object) -> int:
        """Publishes ``table`` at ``path`` whole or not at all; returns its size in bytes.

        Two attempts of one Spark task (a retry, a speculative copy) write the same path: on
        a local filesystem each writes a hidden temporary file and renames it, so the path
        always holds one attempt's complete file; on object stores a PUT is atomic already.
        """
        directory, name = posixpath.split(path)
        self.fs.create_dir(directory, recursive=True)
        if not self.is_local:
            pq.write_table(table, path, filesystem=self.fs, **options)
            return int(self.fs.get_file_info(path).size)
        tmp = posixpath.join(directory, f".{name.lstrip('.')}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            pq.write_table(table, tmp, filesystem=self.fs, **options)
            size = int(self.fs.get_file_info(tmp).size)
            self.fs.move(tmp, path)
        finally:
            if self.exists(tmp):
                self.fs.delete_file(tmp)
        return size

    def walk(self, directory: str) -> Iterator[pafs.FileInfo]:
        yield from self.list_files(directory, recursive=True)
