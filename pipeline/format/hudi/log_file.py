"""Hudi log files: a sequence of blocks, each a Parquet data block, a delete block, (in the
archived timeline) an Avro data block or (in the metadata table) an HFile data block.

A block, all integers big-endian::

    "#HUDI#" | long L | int format version (1) | int block type | header | long content
    length | content | footer | long total

``L`` counts every byte after itself, the trailing long included (a reader skipping a block
of another instant jumps by it, so it must be exact); ``total`` is the block's size before
the trailing long (magic and ``L`` included). Header and footer are an int count, then per
entry an int key, an int length and UTF-8 bytes; the header carries the block's instant and,
for data blocks, the Avro schema of its records. A Parquet data block's content is a whole
Parquet file; a delete block's content is a version (3), a length, and the Avro encoding of
the deleted keys with their partition paths and ordering values; an Avro data block's is a
version (3), a record count, and per record its length and Avro encoding; an HFile data
block's is a whole HFile (``hfile.py``) of Avro-encoded values.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi import delete_scan
from dynbucket.format.hudi.avro import Writer, read_long
from dynbucket.format.hudi.avro_file import encode

MAGIC = b"#HUDI#"
FORMAT_VERSION = 1
DELETE_BLOCK_VERSION = 3
#: Block types (Hudi's ``HoodieLogBlockType`` ordinals; a corrupt block is one that does
#: not read whole, which Hudi's readers skip).
COMMAND, DELETE, CORRUPT, AVRO_DATA, HFILE_DATA, PARQUET_DATA = 0, 1, 2, 3, 4, 5
#: Header keys.
INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, COMMAND_BLOCK_TYPE = 0, 1, 2, 3
#: A command block's type: roll back the blocks of its target instant.
ROLLBACK_COMMAND = "0"

#: Positions in the ``orderingVal`` union of Hudi's delete records.
ORDERING_UNION = {"null": 0, "int": 1, "long": 2, "float": 3, "double": 4, "bytes": 5,
                  "string": 6, "decimal": 7, "date": 8, "time-millis": 9, "time-micros": 10,
                  "timestamp-millis": 11, "timestamp-micros": 12}  # fmt: skip


@dataclass(frozen=True)
class Block:
    """One block of a log file (``content`` a view into the file's bytes, not a copy)."""

    type: int
    header: dict[int, str]
    content: bytes | memoryview

    @property
    def instant(self) -> str:
        return self.header.get(INSTANT_TIME, "")


def data_block(parquet: bytes | memoryview, instant: str, schema_json: str) -> bytes:
    """A Parquet data block holding ``parquet`` (a whole file's bytes)."""
    return _block(PARQUET_DATA, {INSTANT_TIME: instant, SCHEMA: schema_json}, parquet)


def avro_data_block(records: Sequence[bytes], instant: str, schema_json: str) -> bytes:
    """An Avro data block of ``records`` (each already Avro-encoded with ``schema_json``)."""
    body = [struct.pack(">ii", DELETE_BLOCK_VERSION, len(records))]
    body += [struct.pack(">i", len(r)) + r for r in records]
    return _block(AVRO_DATA, {INSTANT_TIME: instant, SCHEMA: schema_json}, b"".join(body))


def hfile_data_block(hfile: bytes, instant: str, schema_json: str) -> bytes:
    """An HFile data block holding ``hfile`` (a whole file's bytes; values encoded with
    ``schema_json``)."""
    return _block(HFILE_DATA, {INSTANT_TIME: instant, SCHEMA: schema_json}, hfile)


def avro_records(block: Block) -> list[bytes]:
    """The encoded records of an Avro data block (decode them with its ``SCHEMA``)."""
    data = memoryview(block.content)
    _version, count = struct.unpack_from(">ii", data, 0)
    out, pos = [], 8
    for _ in range(count):
        (size,) = struct.unpack_from(">i", data, pos)
        out.append(bytes(data[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return out


def delete_block(
    keys: Sequence[str], partitions: Sequence[str], ordering: tuple[str, Any], instant: str
) -> bytes:
    """A delete block of ``keys`` (with their partition paths), each with the ordering value
    ``ordering`` = (union branch, value): Hudi's readers let a delete whose ordering value is
    the integer 0 win by commit order."""
    branch, value = ordering
    w = Writer()

    def record(item: tuple[str, str]) -> None:
        key, partition = item
        w.long(1)
        w.string(key)
        w.long(1)
        w.string(partition)
        w.long(ORDERING_UNION[branch])
        _write_value(w, branch, value)

    w.array(list(zip(keys, partitions, strict=True)), record)
    body = w.getvalue()
    content = struct.pack(">ii", DELETE_BLOCK_VERSION, len(body)) + body
    return _block(DELETE, {INSTANT_TIME: instant}, content)


def _write_value(w: Writer, branch: str, value: Any) -> None:
    """An ordering value of the union branch ``branch`` (logical types as their Avro
    primitives)."""
    encode(w, _PRIMITIVE_OF.get(branch, branch), value, {})


#: The Avro primitive each logical branch of the ordering union is written as.
_PRIMITIVE_OF = {
    "date": "int",
    "time-millis": "int",
    "time-micros": "long",
    "timestamp-millis": "long",
    "timestamp-micros": "long",
    "decimal": "bytes",
}


_BRANCH_NAMES = {v: k for k, v in ORDERING_UNION.items()}


def _metadata(entries: dict[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        data = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(data)) + data)
    return b"".join(out)


def _block(block_type: int, header: dict[int, str], content: bytes | memoryview) -> bytes:
    head = struct.pack(">ii", FORMAT_VERSION, block_type) + _metadata(header)
    tail = _metadata({})
    body = len(head) + 8 + len(content) + len(tail)
    # One join: the content (a whole Parquet file) is copied once.
    return b"".join(
        [
            MAGIC,
            struct.pack(">q", body + 8),
            head,
            struct.pack(">q", len(content)),
            content,
            tail,
            struct.pack(">q", len(MAGIC) + 8 + body),
        ]
    )


def read_blocks(data: bytes | memoryview | pa.Buffer, skip_corrupt: bool = False) -> list[Block]:
    """Every block of a log file (block contents are views into ``data``, not copies).

    Args:
        skip_corrupt: a block that does not read whole becomes a ``CORRUPT`` block up to
            the next block magic, as Hudi's readers take it (a writer that died while
            appending to a log on HDFS leaves one); else it is an error.

    Raises:
        FormatError: the bytes are not a complete log file (bad magic, lengths that do not
            add up, a block cut short), unless ``skip_corrupt``.
    """
    blocks = []
    pos = 0
    view = data = memoryview(data)
    while pos < len(data):
        try:
            block, end = _block_at(view, pos)
        except (ValueError, struct.error):
            if not skip_corrupt:
                raise
            found = bytes(view[pos + 1 :]).find(MAGIC)
            end = len(view) if found < 0 else pos + 1 + found
            block = Block(CORRUPT, {}, view[pos:end])
        blocks.append(block)
        pos = end
    return blocks


def _block_at(view: memoryview, pos: int) -> tuple[Block, int]:
    """The block at ``pos`` and where the next one starts."""
    if bytes(view[pos : pos + 6]) != MAGIC:
        raise FormatError(f"no log block magic at byte {pos}")
    if pos + 14 > len(view):
        raise FormatError(f"log block at byte {pos} is cut short")
    (length,) = struct.unpack_from(">q", view, pos + 6)
    start, end = pos + 14, pos + 14 + length
    if length < 24 or end > len(view):
        raise FormatError(f"log block at byte {pos} claims {length} bytes; the file ends first")
    version, block_type = struct.unpack_from(">ii", view, start)
    if version != FORMAT_VERSION:
        raise FormatError(f"log block at byte {pos} has format version {version}")
    header, p = _read_metadata(view, start + 8)
    (size,) = struct.unpack_from(">q", view, p)
    content = view[p + 8 : p + 8 + size]
    _, p = _read_metadata(view, p + 8 + size)
    (total,) = struct.unpack_from(">q", view, p)
    if p + 8 != end or total != end - 8 - pos:
        raise FormatError(f"log block at byte {pos}: lengths do not add up")
    return Block(block_type, header, content), end


def rolled_back(blocks: Sequence[Block]) -> set[str]:
    """The instants whose blocks a rollback command block among ``blocks`` rolls back
    (Hudi's rollback of a merge-on-read write that had appended to a log)."""
    return {
        b.header.get(TARGET_INSTANT_TIME, "")
        for b in blocks
        if b.type == COMMAND and b.header.get(COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND
    }


def command_block(target: str, instant: str) -> bytes:
    """A rollback command block: the blocks of ``target`` are rolled back."""
    header = {
        INSTANT_TIME: instant,
        TARGET_INSTANT_TIME: target,
        COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
    }
    return _block(COMMAND, header, b"")


def _read_metadata(data: memoryview, pos: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = {}
    for _ in range(count):
        key, size = struct.unpack_from(">ii", data, pos)
        out[key] = bytes(data[pos + 8 : pos + 8 + size]).decode("utf-8")
        pos += 8 + size
    return out, pos


def delete_keys(block: Block) -> pa.StringArray:
    """The record keys of a delete block, in order: what a merge needs of it (decoded by a
    compiled loop: ``delete_scan.py``)."""
    return delete_scan.delete_keys(_delete_records(block))


def read_deletes(block: Block) -> list[tuple[str, str, Any]]:
    """(record key, partition path, ordering value) of each record of a delete block."""
    keys, partitions, orderings = _deletes(block)
    return list(zip(keys, partitions, orderings, strict=True))


def _delete_records(block: Block) -> memoryview:
    """The Avro records of a delete block (after its version and length)."""
    version, size = struct.unpack_from(">ii", block.content, 0)
    if version != DELETE_BLOCK_VERSION:
        raise FormatError(f"delete block version {version}; only {DELETE_BLOCK_VERSION} is read")
    return memoryview(block.content)[8 : 8 + size]


def _deletes(block: Block) -> tuple[list[str], list[str], list[Any]]:
    """The keys, partition paths and ordering values of a delete block's records (what a
    check and a test read; a merge reads the keys alone, compiled: ``delete_scan.py``).
    """
    data = bytes(_delete_records(block))
    pos, end = 0, len(data)
    keys: list[str] = []
    partitions: list[str] = []
    orderings: list[Any] = []
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return keys, partitions, orderings
        if count < 0:  # a block with its byte size: the count is negated
            count = -count
            _, pos = read_long(data, pos)
        for _ in range(count):
            key = partition = ""
            branch, pos = read_long(data, pos)
            if branch:
                size, pos = read_long(data, pos)
                key = data[pos : pos + size].decode("utf-8")
                pos += size
            branch, pos = read_long(data, pos)
            if branch:
                size, pos = read_long(data, pos)
                partition = data[pos : pos + size].decode("utf-8")
                pos += size
            branch, pos = read_long(data, pos)  # the ordering value
            name = _BRANCH_NAMES.get(branch)
            ordering: Any = None
            if name in ("string", "bytes", "decimal"):
                size, pos = read_long(data, pos)
                raw = data[pos : pos + size]
                ordering = raw.decode("utf-8") if name == "string" else raw
                pos += size
            elif name in ("float", "double"):
                width, fmt = (4, "<f") if name == "float" else (8, "<d")
                if pos + width > end:
                    raise FormatError(f"Avro data ends at byte {end}, needed {pos + width}")
                ordering = float(struct.unpack_from(fmt, data, pos)[0])
                pos += width
            elif name is None:
                raise FormatError(f"delete record ordering value of union branch {branch}")
            elif name != "null":
                ordering, pos = read_long(data, pos)
            if pos > end:
                raise FormatError(f"Avro data ends at byte {end}, needed {pos}")
            keys.append(key)
            partitions.append(partition)
            orderings.append(ordering)
