"""Avro object container files: what Hudi 1.x (table versions 8 and 9) keeps in its
timeline (a completed commit's ``HoodieCommitMetadata``, a replace commit's
``HoodieReplaceCommitMetadata``, ...), where version 6 keeps JSON.

A file is ``Obj\\x01``, a metadata map (``avro.schema``, ``avro.codec``), a 16-byte sync
marker, then blocks: a record count, a byte size, the records (``null`` or ``deflate``
codec) and the sync marker again. Values here are plain Python: records and maps as dicts,
arrays as lists, a union as whichever branch the value fits (None: ``null``).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi.avro import Writer, read_long
from dynbucket.format.hudi.avro_read import decoder

MAGIC = b"Obj\x01"
_HEADER_SCHEMA = {"type": "map", "values": "bytes"}


def is_container(data: bytes) -> bool:
    return data[:4] == MAGIC


def read(data: bytes) -> tuple[dict[str, Any], list[Any]]:
    """The writer's schema and the records of an object container file.

    Raises:
        FormatError: not a whole container file, or a codec other than null and deflate.
    """
    if not is_container(data):
        raise FormatError("not an Avro object container file (no Obj\\x01 magic)")
    view = memoryview(data)
    meta, pos = decoder(_HEADER_SCHEMA, maps_as_dicts=True)(view, 4)
    schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", b"null").decode()
    if codec not in ("null", "deflate"):
        raise FormatError(f"Avro codec {codec!r}: only null and deflate are read")
    sync = bytes(view[pos : pos + 16])
    pos += 16
    decode = decoder(schema, maps_as_dicts=True)
    records: list[Any] = []
    while pos < len(view):
        count, pos = read_long(view, pos)
        size, pos = read_long(view, pos)
        block = bytes(view[pos : pos + size])
        pos += size
        if bytes(view[pos : pos + 16]) != sync:
            raise FormatError(f"Avro block at byte {pos - size}: sync marker missing")
        pos += 16
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        at = 0
        for _ in range(count):
            value, at = decode(memoryview(block), at)
            records.append(value)
    return schema, records


def write(schema: dict[str, Any], records: list[Any]) -> bytes:
    """An object container file of ``records`` (uncompressed: a few KB of metadata)."""
    w = Writer()
    w.out.write(MAGIC)
    w.long(2)
    w.string("avro.schema")
    w.bytes_(json.dumps(schema, separators=(",", ":")).encode())
    w.string("avro.codec")
    w.bytes_(b"null")
    w.long(0)
    body = Writer()
    for record in records:
        encode(body, schema, record, {})
    # Derived from the records: equal records give equal files (a commit published twice,
    # by its writer and by a settler, is one file either way).
    sync = hashlib.md5(body.getvalue()).digest()
    w.out.write(sync)
    w.long(len(records))
    w.bytes_(body.getvalue())
    w.out.write(sync)
    return w.getvalue()


def encode(w: Writer, t: Any, value: Any, named: dict[str, Any]) -> None:
    """Writes ``value`` as the Avro type ``t``."""
    if isinstance(t, list):
        for i, branch in enumerate(t):
            if _fits(branch, value, named):
                w.long(i)
                encode(w, branch, value, named)
                return
        raise ValueError(f"value {value!r} fits no branch of the Avro union {t}")
    if isinstance(t, str):
        if t in named:
            encode(w, named[t], value, named)
        elif t == "null":
            pass
        elif t == "boolean":
            w.out.write(b"\x01" if value else b"\x00")
        elif t in ("int", "long"):
            w.long(int(value))
        elif t == "float":
            w.float_(float(value))
        elif t == "double":
            w.double(float(value))
        elif t == "bytes":
            w.bytes_(bytes(value))
        elif t == "string":
            w.string(str(value))
        else:
            raise ValueError(f"Avro type {t!r} is not written here")
        return
    kind = t["type"]
    if "name" in t:
        named[t["name"]] = t
    if kind == "record":
        for f in t["fields"]:
            encode(w, f["type"], value.get(f["name"], f.get("default")), named)
    elif kind == "array":
        w.array(list(value), lambda item: encode(w, t["items"], item, named))
    elif kind == "map":
        items = list(value.items())
        if items:
            w.long(len(items))
            for k, v in items:
                w.string(k)
                encode(w, t["values"], v, named)
        w.long(0)
    else:
        encode(w, kind, value, named)


def _fits(t: Any, value: Any, named: dict[str, Any]) -> bool:
    """Whether ``value`` is of the Avro type ``t`` (for picking a union's branch)."""
    if isinstance(t, dict):
        kind = t["type"]
        if kind == "record":
            return isinstance(value, dict)
        if kind == "map":
            return isinstance(value, dict)
        if kind == "array":
            return isinstance(value, (list, tuple))
        return _fits(kind, value, named)
    if t in named:
        return _fits(named[t], value, named)
    return {
        "null": value is None,
        "boolean": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "long": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, float),
        "double": isinstance(value, (float, int)) and not isinstance(value, bool),
        "bytes": isinstance(value, (bytes, bytearray)),
        "string": isinstance(value, str),
    }.get(t, False)
