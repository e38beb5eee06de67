"""HFile version 3: the base files and log-block payloads of Hudi's metadata table.

Hudi keeps its metadata table (the ``files`` listing, the record index, ...) in HFiles, an
SSTable: key-value pairs sorted by key, cut into blocks, with an index of each block's
first key, so a reader finds one key by reading the index and one block, never the whole
file. Layout (Hudi's ``hudi-io/hfile_format.md``)::

    data blocks | meta blocks | root data index | meta index | file info | trailer (4 KiB)

Every block but the trailer is a 33-byte header (magic, on-disk size without the header,
uncompressed size, previous block offset, checksum type, bytes per checksum, on-disk data
size with the header), the (gzip- or un-)compressed payload, then checksum bytes. A data
block's payload is its entries: ``int key length | int value length | key | value | vlong
MVCC timestamp`` (always 0 here), the key being HBase's ``short row length | row | byte
family length | family | qualifier | long timestamp | byte type``, of which Hudi uses the
row only: the record key in UTF-8. An index entry is ``long offset | int on-disk size |
vint key length | key``. File info is ``PBUF`` and a length-delimited protobuf map; the
trailer is its magic, a length-delimited protobuf of offsets and counts, and the version
(minor 0, major 3) in its last 4 bytes.

What this module writes is what Hudi's own writer writes: one index level, no checksum
(type ``NULL``), the keys' order the bytes' order (Hudi's ``HoodieHBaseKVComparator``).
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import os
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.errors import FormatError
from dynbucket.base.threads import shared_pool
from dynbucket.format.hudi import hfile_scan

DATA, META, ROOT_INDEX, FILE_INFO, TRAILER = (
    b"DATABLK*",
    b"METABLKc",
    b"IDXROOT2",
    b"FILEINF2",
    b'TRABLK"$',
)
#: Index levels below the root (HBase writes them for files with many blocks; read only).
LEAF_INDEX, INTERMEDIATE_INDEX = b"IDXLEAF2", b"IDXINTE2"
HEADER_SIZE = 33
TRAILER_SIZE = 4096
#: ``compression_codec`` in the trailer.
GZ, NONE = 1, 2
#: Fewest data blocks a thread of :meth:`HFile.arrays` reads (2 MiB of 64 KiB blocks).
_BLOCKS_PER_RUN = 32
#: HBase's KeyValue type ``Put`` and the "latest" timestamp, which complete each key.
_PUT, _LATEST = 4, (1 << 63) - 1
_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
#: File info keys every HFile carries (values are Java's big-endian ints and longs).
LAST_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME = (
    "hfile.LASTKEY",
    "hfile.AVG_KEY_LEN",
    "hfile.AVG_VALUE_LEN",
    "hfile.CREATE_TIME_TS",
)
KEY_VALUE_VERSION, MAX_MEMSTORE_TS = "KEY_VALUE_VERSION", "MAX_MEMSTORE_TS_KEY"


@dataclass(frozen=True)
class _Block:
    offset: int
    size: int  # on disk, header included
    first_key: bytes


@dataclass(frozen=True)
class HFile:
    """A parsed HFile: its index, meta index and file info, read from the last bytes; data
    blocks are read when asked for (``get`` reads one block)."""

    data: memoryview
    blocks: tuple[_Block, ...]
    meta: Mapping[str, _Block]
    file_info: Mapping[str, bytes]
    entry_count: int
    codec: int
    _first_keys: list[bytes] = field(repr=False, compare=False)

    @classmethod
    def read(cls, data: bytes | memoryview, name: str = "HFile") -> HFile:
        """Parses ``data`` (a whole file; ``name`` goes into errors).

        Raises:
            FormatError: not an HFile of major version 3, or a block that does not parse.
        """
        view = memoryview(data)
        try:
            return cls._read(view)
        except (struct.error, IndexError, ValueError, EOFError, OSError) as e:
            if isinstance(e, FormatError):
                raise FormatError(f"{name}: {e}") from e
            raise FormatError(f"{name}: not a readable HFile ({e})") from e

    @classmethod
    def _read(cls, view: memoryview) -> HFile:
        # 1. The trailer: its magic, the version in its last 4 bytes, the protobuf.
        if len(view) < TRAILER_SIZE:
            raise FormatError(f"{len(view)} bytes, shorter than an HFile's trailer")
        trailer = view[len(view) - TRAILER_SIZE :]
        if bytes(trailer[:8]) != TRAILER:
            raise FormatError("no HFile trailer magic in the last 4096 bytes")
        major = int.from_bytes(trailer[-3:], "big")
        if major != 3:
            raise FormatError(f"HFile major version {major}; only 3 is read")
        length, pos = _read_varint(trailer, 8)
        fields = _protobuf_fields(bytes(trailer[pos : pos + length]))
        codec = int(fields.get(12, NONE))
        if codec not in (GZ, NONE):
            raise FormatError(f"HFile compression codec {codec}: only GZ (1) and NONE (2)")
        levels = int(fields.get(8, 1))
        # 2. The load-on-open section: the root data index, the meta index, file info.
        at = int(fields.get(2, 0))
        root, at = _read_block(view, at, codec, (ROOT_INDEX,))
        meta_index, at = _read_block(view, at, codec, (ROOT_INDEX,))
        info, _ = _read_block(view, int(fields.get(1, at)), codec, (FILE_INFO,))
        blocks = _index_entries(root, int(fields.get(5, 0)), keyed=True)
        for _ in range(levels - 1):
            blocks = [
                entry
                for b in blocks
                for entry in _lower_index(_read_block(view, b.offset, codec, _LOWER)[0])
            ]
        return cls(
            data=view,
            blocks=tuple(blocks),
            meta={
                e.first_key.decode(): e
                for e in _index_entries(meta_index, int(fields.get(6, 0)), keyed=False)
            },
            file_info=_file_info(info),
            entry_count=int(fields.get(7, 0)),
            codec=codec,
            _first_keys=[b.first_key for b in blocks],
        )

    @property
    def schema(self) -> str | None:
        """The Avro schema of the values (Hudi's ``schema`` file info), if there is one."""
        raw = self.file_info.get("schema")
        return None if raw is None else raw.decode()

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) in key order."""
        for block in self.blocks:
            yield from _entries(_read_block(self.data, block.offset, self.codec, (DATA,))[0])

    def arrays(self) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        """Every key and value in key order, as Arrow (a compiled scan per block:
        ``hfile_scan.py``; what a whole-file read takes instead of :meth:`items`). A large
        file is read in as many runs of blocks as there are cores, each inflated and
        scanned in a thread (a slot's bootstrap reads a partition's record index whole:
        2M keys took 0.45 s in one thread)."""
        workers = min(os.cpu_count() or 1, len(self.blocks) // _BLOCKS_PER_RUN)
        if workers < 2:
            return self._run(self.blocks)
        bounds = np.linspace(0, len(self.blocks), workers + 1).astype(int).tolist()
        runs = [self.blocks[a:b] for a, b in itertools.pairwise(bounds)]
        read = list(shared_pool("hfile-runs", workers).map(self._run, runs))
        return pa.concat_arrays([k for k, _ in read]), pa.concat_arrays([v for _, v in read])

    def _run(self, blocks: Sequence[_Block]) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        # Blocks end between entries: their payloads together are one run of entries.
        payloads = b"".join(
            _read_block(self.data, block.offset, self.codec, (DATA,))[0] for block in blocks
        )
        return hfile_scan.entries(payloads)

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, reading only the one block that can hold it."""
        i = bisect.bisect_right(self._first_keys, key) - 1
        if i < 0:
            return None
        payload = _read_block(self.data, self.blocks[i].offset, self.codec, (DATA,))[0]
        for k, v in _entries(payload):
            if k == key:
                return v
            if k > key:
                return None
        return None

    def meta_block(self, name: str) -> bytes | None:
        """The payload of the meta block ``name`` (Hudi's ``bloomFilter``), if present."""
        entry = self.meta.get(name)
        if entry is None:
            return None
        return _read_block(self.data, entry.offset, self.codec, (META,))[0]


_LOWER = (LEAF_INDEX, INTERMEDIATE_INDEX)


def _read_block(
    view: memoryview, at: int, codec: int, magics: tuple[bytes, ...]
) -> tuple[bytes, int]:
    """The payload (uncompressed) of the block at ``at`` and where the next block starts."""
    magic = bytes(view[at : at + 8])
    if magic not in magics:
        raise FormatError(f"block at byte {at} has magic {magic!r}, expected {magics[0]!r}")
    on_disk, uncompressed, _prev, _ctype, _per, with_header = struct.unpack_from(
        ">iiqbii", view, at + 8
    )
    payload = bytes(view[at + HEADER_SIZE : at + with_header])
    if codec == GZ:  # one gzip member (zlib checks its CRC, as gzip's module does, in C)
        payload = zlib.decompress(payload, wbits=31) if payload else b""
    if len(payload) != uncompressed:
        raise FormatError(f"block at byte {at}: {len(payload)} bytes, header says {uncompressed}")
    return payload, at + HEADER_SIZE + on_disk


def _index_entries(payload: bytes, count: int, keyed: bool) -> list[_Block]:
    """A root index's entries: data blocks (``keyed``: by their first key's row) or meta
    blocks (by name)."""
    out, pos = [], 0
    for _ in range(count):
        offset, size = struct.unpack_from(">qi", payload, pos)
        length, pos = _read_vint(payload, pos + 12)
        key = payload[pos : pos + length]
        pos += length
        out.append(_Block(offset, size, _row(key) if keyed else key))
    return out


def _lower_index(payload: bytes) -> list[_Block]:
    """A leaf or intermediate index block: a count, the entries' offsets, then entries of
    ``long offset | int size | key`` (HBase's non-root index layout)."""
    (count,) = struct.unpack_from(">i", payload, 0)
    offsets = struct.unpack_from(f">{count + 1}i", payload, 4)
    base = 4 + 4 * (count + 1)
    out = []
    for i in range(count):
        start, end = base + offsets[i], base + offsets[i + 1]
        offset, size = struct.unpack_from(">qi", payload, start)
        out.append(_Block(offset, size, _row(payload[start + 12 : end])))
    return out


def _row(key: bytes) -> bytes:
    (length,) = struct.unpack_from(">h", key, 0)
    return key[2 : 2 + length]


def _entries(payload: bytes) -> Iterator[tuple[bytes, bytes]]:
    pos, end = 0, len(payload)
    while pos < end:
        key_len, value_len = struct.unpack_from(">ii", payload, pos)
        key = payload[pos + 8 : pos + 8 + key_len]
        value = payload[pos + 8 + key_len : pos + 8 + key_len + value_len]
        _, pos = _read_vint(payload, pos + 8 + key_len + value_len)  # the MVCC timestamp
        yield _row(key), value


def _file_info(payload: bytes) -> dict[str, bytes]:
    if payload[:4] != b"PBUF":
        raise FormatError("HFile file info does not start with PBUF")
    length, pos = _read_varint(payload, 4)
    out: dict[str, bytes] = {}
    for number, pair in _protobuf_items(payload[pos : pos + length]):
        if number == 1 and isinstance(pair, bytes):
            kv = _protobuf_fields(pair)
            out[bytes(kv.get(1, b"")).decode()] = bytes(kv.get(2, b""))
    return out


# --- writing -------------------------------------------------------------------------------


def write(
    items: Iterable[tuple[bytes, bytes]],
    file_info: Mapping[str, bytes] = {},
    meta: Mapping[str, bytes] = {},
    block_size: int = 64 * 1024,
    codec: int = GZ,
) -> bytes:
    """An HFile of ``items`` (keys strictly ascending as bytes): :func:`write_arrays`."""
    pairs = list(items)
    return write_arrays(
        pa.array([k for k, _ in pairs], pa.binary()),
        pa.array([v for _, v in pairs], pa.binary()),
        file_info,
        meta,
        block_size,
        codec,
    )


def write_arrays(
    keys: pa.BinaryArray,
    values: pa.Array,
    file_info: Mapping[str, bytes] = {},
    meta: Mapping[str, bytes] = {},
    block_size: int = 64 * 1024,
    codec: int = GZ,
) -> bytes:
    """An HFile of ``keys`` (strictly ascending as bytes) and their ``values`` (binary, or
    dictionary-coded binary: each value's bytes copied once, from its entry), with
    ``file_info`` beside the entries every HFile carries and ``meta`` blocks by name.

    Raises:
        ValueError: keys not strictly ascending (an HFile is sorted; Hudi's readers
            binary-search it), or a key over 32767 bytes.
    """
    count = len(keys)
    if count > 1:
        out_of_order = pc.less_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
        if out_of_order.any():
            at = int(np.flatnonzero(out_of_order)[0])
            raise ValueError(
                f"HFile keys must be strictly ascending: {keys[at + 1].as_py()!r} after "
                f"{keys[at].as_py()!r}"
            )
    key_bytes = int(pc.sum(pc.binary_length(keys)).as_py() or 0)
    value_bytes = int(hfile_scan.lengths(values).sum())
    longest = int(pc.max(pc.binary_length(keys)).as_py() or 0) if count else 0
    if longest > 0x7FFF:
        raise ValueError(f"an HFile key is at most 32767 bytes; one is {longest}")
    out = bytearray()
    index: list[tuple[int, int, bytes]] = []
    total_uncompressed = 0
    # 1. Data blocks: entries laid out in one pass, cut once a block reaches block_size.
    payload, firsts, starts = hfile_scan.pack(keys, values, _KEY_SUFFIX, block_size)
    for i, (first, start) in enumerate(zip(firsts, starts, strict=True)):
        stop = starts[i + 1] if i + 1 < len(starts) else len(payload)
        at = len(out)
        out.extend(_block(DATA, payload[start:stop], codec))
        index.append((at, len(out) - at, _kv_key(keys[first].as_py())))
        total_uncompressed += HEADER_SIZE + stop - start
    last = keys[count - 1].as_py() if count else None
    last_data = len(out)
    # 2. Meta blocks, then the load-on-open section: the root data index, the meta
    #    index, file info.
    meta_index: list[tuple[int, int, bytes]] = []
    for name in sorted(meta):
        start = len(out)
        out.extend(_block(META, meta[name], codec))
        meta_index.append((start, len(out) - start, name.encode()))
        total_uncompressed += HEADER_SIZE + len(meta[name])
    load_on_open = len(out)
    root = _index_payload(index)
    out.extend(_block(ROOT_INDEX, root, codec))
    out.extend(_block(ROOT_INDEX, _index_payload(meta_index), codec))
    # As Hudi's writer: the last key as its row only (length-prefixed), average lengths of
    # rows and values.
    info = {
        LAST_KEY: b"" if last is None else struct.pack(">h", len(last)) + last,
        AVG_KEY_LEN: struct.pack(">i", key_bytes // count if count else 0),
        AVG_VALUE_LEN: struct.pack(">i", value_bytes // count if count else 0),
        CREATE_TIME: struct.pack(">q", int(time.time() * 1000)),
        KEY_VALUE_VERSION: struct.pack(">i", 1),
        MAX_MEMSTORE_TS: struct.pack(">q", 0),
        **file_info,
    }
    file_info_at = len(out)
    out.extend(_block(FILE_INFO, _file_info_payload(info), codec))
    # 3. The trailer.
    fields: list[tuple[int, int | bytes]] = [
        (1, file_info_at), (2, load_on_open), (3, HEADER_SIZE + len(root)),
        (4, total_uncompressed), (5, len(index)), (6, len(meta_index)), (7, count), (8, 1),
        (9, 0 if index else (1 << 64) - 1), (10, last_data), (11, _COMPARATOR.encode()),
        (12, codec),
    ]  # fmt: skip
    message = b"".join(_protobuf_field(n, v) for n, v in fields)
    trailer = TRAILER + _varint(len(message)) + message
    out.extend(trailer + bytes(TRAILER_SIZE - 4 - len(trailer)) + b"\x00\x00\x00\x03")
    return bytes(out)


#: What follows the row in every key: no family, no qualifier, the latest timestamp, Put.
_KEY_SUFFIX = b"\x00" + struct.pack(">qb", _LATEST, _PUT)


def _kv_key(row: bytes) -> bytes:
    if len(row) > 0x7FFF:
        raise ValueError(f"an HFile key is at most 32767 bytes; this one is {len(row)}")
    return struct.pack(">h", len(row)) + row + _KEY_SUFFIX


def _block(magic: bytes, payload: bytes, codec: int) -> bytes:
    """A block: header, payload (compressed by ``codec``), and no checksum bytes beyond the
    4 per chunk readers skip (type ``NULL``; one chunk covers the whole block)."""
    # Level 1: a record-index base is rewritten inside a commit, and level 9 (Python's
    # default) took 4 times as long for 2% fewer bytes; readers inflate any level.
    body = gzip.compress(payload, compresslevel=1, mtime=0) if codec == GZ else payload
    chunk = max(16 * 1024, HEADER_SIZE + len(body) + 4)
    header = magic + struct.pack(
        ">iiqbii", len(body) + 4, len(payload), -1, 0, chunk, HEADER_SIZE + len(body)
    )
    return header + body + b"\x00\x00\x00\x00"


def _index_payload(entries: list[tuple[int, int, bytes]]) -> bytes:
    return b"".join(
        struct.pack(">qi", offset, size) + _vint(len(key)) + key for offset, size, key in entries
    )


def _file_info_payload(info: Mapping[str, bytes]) -> bytes:
    pairs = b"".join(
        _protobuf_field(1, _protobuf_field(1, k.encode()) + _protobuf_field(2, v))
        for k, v in sorted(info.items())
    )
    return b"PBUF" + _varint(len(pairs)) + pairs


# --- protobuf and Hadoop varints -----------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return n, pos


def _protobuf_field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _protobuf_items(message: bytes) -> Iterator[tuple[int, int | bytes]]:
    """Each field of ``message`` in order (varints as ints, the rest as bytes)."""
    pos = 0
    while pos < len(message):
        key, pos = _read_varint(message, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(message, pos)
            yield number, value
        elif wire == 2:
            length, pos = _read_varint(message, pos)
            yield number, message[pos : pos + length]
            pos += length
        else:
            raise FormatError(f"protobuf wire type {wire} in an HFile")


def _protobuf_fields(message: bytes) -> dict[int, int | bytes]:
    """The last value of each field of ``message``."""
    return dict(_protobuf_items(message))


def _vint(n: int) -> bytes:
    """Hadoop's ``WritableUtils`` vint (an index entry's key length)."""
    if -112 <= n <= 127:
        return struct.pack(">b", n)
    size = (n.bit_length() + 7) // 8
    return struct.pack(">b", -112 - size) + n.to_bytes(size, "big")


def _read_vint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    size = (-119 - first) if negative else (-111 - first)
    n = int.from_bytes(bytes(data[pos + 1 : pos + size]), "big")
    return (~n if negative else n), pos + size
