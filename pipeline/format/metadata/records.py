"""The records of Hudi's metadata table: ``HoodieMetadataRecord``, Avro-encoded in HFiles.

One record type for every partition of the metadata table, told apart by ``type``; the
HFile key is the record key, and the record's own ``key`` field is left empty (Hudi's
writer does the same: the key is in the HFile already). What this module reads and writes:

* ``files``: per data partition (key: its path, ``.`` for a table without partitions), a
  map of file name to ``HoodieMetadataFileInfo {size, isDeleted}`` (type 2); and one record
  ``__all_partitions__`` mapping each partition to size 0 (type 1). A delta's record names
  only the files the instant added (or deleted: ``isDeleted``); a reader merges them.
* ``record_index``: per record key, its location (type 5, ``HoodieRecordIndexInfo``): the
  data partition, the file id (a UUID with a file index as two longs and an int, encoding
  0; else the string, encoding 1) and the instant that wrote it, as epoch milliseconds.

The schema is Hudi's (field names, order and types as its readers resolve them); it is
built here rather than read from a file so that the format is spelled in one place.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dynbucket.format.hudi.avro import Writer
from dynbucket.format.hudi.avro_file import encode
from dynbucket.format.hudi.avro_read import decoder
from dynbucket.format.timeline.timeline import instant_time

#: ``type`` of a record, by partition.
ALL_PARTITIONS, FILES, COLUMN_STATS, BLOOM_FILTERS, RECORD_INDEX = 1, 2, 3, 4, 5
PARTITION_STATS, SECONDARY_INDEX = 6, 7
ALL_PARTITIONS_KEY = "__all_partitions__"
#: The ``files`` key of a table without partitions.
NON_PARTITIONED = "."
#: ``fileIdEncoding``: a UUID file id with its index (``<uuid>-<n>``) as numbers; any other
#: file id as a string.
UUID_ENCODING, STRING_ENCODING = 0, 1


def _nullable(t: Any) -> list[Any]:
    return ["null", t]


def _string() -> dict[str, str]:
    return {"type": "string", "avro.java.string": "String"}


def _opt(name: str, t: Any) -> dict[str, Any]:
    return {"name": name, "type": _nullable(t), "default": None}


def _record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": fields}


def _wrapper(name: str, t: Any) -> dict[str, Any]:
    return _record(name, [{"name": "value", "type": t}])


def _column_stats() -> dict[str, Any]:
    """``HoodieMetadataColumnStats`` (written by Hudi's column-stats partitions; carried in
    the schema so that every reader resolves it, never written here)."""
    wrappers = [
        _wrapper("BooleanWrapper", "boolean"),
        _wrapper("IntWrapper", "int"),
        _wrapper("LongWrapper", "long"),
        _wrapper("FloatWrapper", "float"),
        _wrapper("DoubleWrapper", "double"),
        _wrapper("BytesWrapper", "bytes"),
        _wrapper("StringWrapper", _string()),
        _wrapper("DateWrapper", "int"),
        _wrapper(
            "DecimalWrapper",
            {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
        ),
        _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
        _wrapper("TimestampMicrosWrapper", "long"),
        _wrapper("LocalDateWrapper", "int"),
    ]
    names = [w["name"] for w in wrappers]
    array = _record(
        "ArrayWrapper",
        [_opt("wrappedValues", {"type": "array", "items": ["null", *names]})],
    )
    value_type = _record(
        "HoodieValueTypeInfo",
        [{"name": "typeOrdinal", "type": "int"}, _opt("additionalInfo", _string())],
    )
    return _record(
        "HoodieMetadataColumnStats",
        [
            _opt("fileName", _string()),
            _opt("columnName", _string()),
            {"name": "minValue", "type": ["null", *wrappers, array], "default": None},
            {"name": "maxValue", "type": ["null", *names, "ArrayWrapper"], "default": None},
            *(_opt(n, "long") for n in ("valueCount", "nullCount", "totalSize")),
            _opt("totalUncompressedSize", "long"),
            {"name": "isDeleted", "type": "boolean"},
            {"name": "isTightBound", "type": "boolean", "default": False},
            _opt("valueType", value_type),
        ],
    )


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """Hudi's ``HoodieMetadataRecord`` schema (namespace ``org.apache.hudi.avro.model``)."""
    file_info = _record(
        "HoodieMetadataFileInfo",
        [{"name": "size", "type": "long"}, {"name": "isDeleted", "type": "boolean"}],
    )
    bloom = _record(
        "HoodieMetadataBloomFilter",
        [
            {"name": "type", "type": _string()},
            {"name": "timestamp", "type": _string()},
            {"name": "bloomFilter", "type": "bytes"},
            {"name": "isDeleted", "type": "boolean"},
        ],
    )
    record_index = _record(
        "HoodieRecordIndexInfo",
        [
            _opt("partitionName", _string()),
            _opt("fileIdHighBits", "long"),
            _opt("fileIdLowBits", "long"),
            _opt("fileIndex", "int"),
            _opt("fileId", _string()),
            _opt("instantTime", "long"),
            {"name": "fileIdEncoding", "type": "int", "default": 0},
            _opt("position", "long"),
        ],
    )
    secondary = _record("HoodieSecondaryIndexInfo", [{"name": "isDeleted", "type": "boolean"}])
    meta = (
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    )
    out = _record(
        "HoodieMetadataRecord",
        [
            *(_opt(n, "string") for n in meta),
            {"name": "key", "type": _string()},
            {"name": "type", "type": "int"},
            {
                "name": "filesystemMetadata",
                "type": _nullable(
                    {"type": "map", "values": file_info, "avro.java.string": "String"}
                ),
            },
            _opt("BloomFilterMetadata", bloom),
            _opt("ColumnStatsMetadata", _column_stats()),
            _opt("recordIndexMetadata", record_index),
            _opt("SecondaryIndexMetadata", secondary),
        ],
    )
    out["namespace"] = "org.apache.hudi.avro.model"
    return out


@lru_cache(maxsize=1)
def schema_json() -> str:
    return json.dumps(schema(), separators=(",", ":"))


# --- the files partition ---------------------------------------------------------------------


def files_record(
    listing: Mapping[str, int], deleted: Iterable[str] = (), schema_json: str | None = None
) -> bytes:
    """A ``files`` record of one partition: ``listing`` (file name -> size) added, the
    files ``deleted`` named as deleted (``schema_json``: the metadata table's, when it is
    not this module's: a table Hudi 1.0 wrote)."""
    files = {name: {"size": size, "isDeleted": False} for name, size in listing.items()}
    files.update({name: {"size": 0, "isDeleted": True} for name in deleted})
    return _encode(FILES, schema_json, filesystemMetadata=files)


def all_partitions_record(
    partitions: Iterable[str], deleted: Iterable[str] = (), schema_json: str | None = None
) -> bytes:
    """The ``__all_partitions__`` record: ``partitions`` (``.`` for none) added or deleted."""
    files = {p: {"size": 0, "isDeleted": False} for p in partitions}
    files.update({p: {"size": 0, "isDeleted": True} for p in deleted})
    return _encode(ALL_PARTITIONS, schema_json, filesystemMetadata=files)


def merge_listing(into: dict[str, int], value: bytes, writer_schema: str | None = None) -> None:
    """Applies one ``files`` record (a base file's or a delta's) to ``into`` (name -> size):
    added files set their size (a larger one wins: a log file that grew), deleted ones go."""
    record = decode(value, writer_schema)
    for name, info in (record.get("filesystemMetadata") or {}).items():
        if info["isDeleted"]:
            into.pop(name, None)
        else:
            into[name] = max(into.get(name, 0), info["size"])


# --- the record index ------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where a key's live row is: ``HoodieRecordIndexInfo``."""

    partition: str
    file_id: str
    instant_millis: int
    """The writing instant as epoch milliseconds (Hudi's ``instantTime``; -1: unknown)."""


@lru_cache(maxsize=4096)
def record_index_record(location: Location, schema_json: str | None = None) -> bytes:
    """The ``record_index`` record of one key (the key itself is the HFile's: every key
    of a file group one instant wrote has the same bytes, encoded once)."""
    info: dict[str, Any] = {
        "partitionName": location.partition,
        "fileIdEncoding": STRING_ENCODING,
        "fileId": location.file_id,
        "instantTime": location.instant_millis,
    }
    parts = _uuid_file_id(location.file_id)
    if parts is not None:
        high, low, index = parts
        info.update(
            fileIdHighBits=high,
            fileIdLowBits=low,
            fileIndex=index,
            fileId="",
            fileIdEncoding=UUID_ENCODING,
        )
    return _encode(RECORD_INDEX, schema_json, recordIndexMetadata=info)


def location_of(value: bytes, writer_schema: str | None = None) -> Location:
    """The location a ``record_index`` record holds."""
    info = decode(value, writer_schema)["recordIndexMetadata"]
    if info["fileIdEncoding"] == UUID_ENCODING:
        bits = (info["fileIdHighBits"] << 64) | (info["fileIdLowBits"] & (1 << 64) - 1)
        file_id = f"{uuid.UUID(int=bits & (1 << 128) - 1)}-{info['fileIndex']}"
    else:
        file_id = info["fileId"]
    instant = info["instantTime"]
    return Location(info["partitionName"], file_id, -1 if instant is None else instant)


@lru_cache(maxsize=1024)
def instant_millis(instant: str) -> int:
    """Hudi's ``instantTime`` of a record index entry: the instant id (UTC here, as the
    timeline's ids are) as epoch milliseconds."""
    return round(instant_time(instant).timestamp() * 1000)


def _uuid_file_id(file_id: str) -> tuple[int, int, int] | None:
    """A ``<uuid>-<n>`` file id as (high bits, low bits, n), signed as Java's longs."""
    head, index = file_id[:36], file_id[37:]
    if file_id[36:37] != "-" or not index.isdigit():
        return None
    try:
        bits = uuid.UUID(head).int
    except ValueError:
        return None
    if str(uuid.UUID(int=bits)) != head.lower() or head != head.lower():
        return None
    return _signed(bits >> 64), _signed(bits & (1 << 64) - 1), int(index)


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


# --- encoding --------------------------------------------------------------------------------


def _encode(record_type: int, schema_json: str | None, **fields: Any) -> bytes:
    w = Writer()
    record = {"key": "", "type": record_type, "filesystemMetadata": None, **fields}
    encode(w, _parsed(schema_json) if schema_json else schema(), record, {})
    return w.getvalue()


@lru_cache(maxsize=16)
def _parsed(schema_json: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(schema_json)
    return parsed


def decode(value: bytes, writer_schema: str | None = None) -> dict[str, Any]:
    """A record by the writer's schema (an HFile's ``schema`` or a log block's header;
    None: Hudi's own, as written here)."""
    record, _ = _decoder(writer_schema or schema_json())(memoryview(value), 0)
    return record


@lru_cache(maxsize=16)
def _decoder(schema_json: str) -> Any:
    return decoder(json.loads(schema_json), maps_as_dicts=True)
