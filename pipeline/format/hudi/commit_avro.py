"""A completed commit's metadata as Hudi 1.x writes it (table versions 8 and 9): the
``HoodieCommitMetadata`` Avro record in an object container file (``avro_file.py``), where
version 6 keeps the same fields as JSON (``commit.py``).

The schema names the fields dynbucket fills (each nullable, as Hudi's are); a reader
resolves the file's own schema against its own, so the fields Hudi has and this one does
not read as their defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynbucket.format.hudi import avro_file

_NAMESPACE = "org.apache.hudi.avro.model"


def _nullable(name: str, t: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", t], "default": None}


_WRITE_STAT: dict[str, Any] = {
    "type": "record",
    "name": "HoodieWriteStat",
    "namespace": _NAMESPACE,
    "fields": [
        *(_nullable(n, "string") for n in ("fileId", "path", "prevCommit")),
        *(
            _nullable(n, "long")
            for n in (
                "numWrites",
                "numDeletes",
                "numUpdateWrites",
                "totalWriteBytes",
                "totalWriteErrors",
            )
        ),
        _nullable("partitionPath", "string"),
        *(
            _nullable(n, "long")
            for n in (
                "totalLogRecords",
                "totalLogFiles",
                "totalUpdatedRecordsCompacted",
                "numInserts",
                "totalLogBlocks",
                "totalCorruptLogBlock",
                "totalRollbackBlocks",
                "fileSizeInBytes",
            )
        ),
        _nullable("logVersion", "int"),
        _nullable("logOffset", "long"),
        _nullable("baseFile", "string"),
        _nullable("logFiles", {"type": "array", "items": "string"}),
        *(_nullable(n, "long") for n in ("totalLogFilesCompacted", "totalLogSizeCompacted")),
    ],
}
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": _NAMESPACE,
    "fields": [
        _nullable(
            "partitionToWriteStats",
            {"type": "map", "values": {"type": "array", "items": _WRITE_STAT}},
        ),
        _nullable("compacted", "boolean"),
        _nullable("extraMetadata", {"type": "map", "values": "string"}),
        {"name": "version", "type": ["int", "null"], "default": 1},
        _nullable("operationType", "string"),
    ],
}
_STAT_FIELDS = [f["name"] for f in _WRITE_STAT["fields"]]


def encode(document: Mapping[str, Any]) -> bytes:
    """The object container file of a commit's ``document`` (``commit.commit_metadata``'s
    JSON form)."""
    stats = {
        partition: [{k: stat.get(k) for k in _STAT_FIELDS} for stat in group]
        for partition, group in (document.get("partitionToWriteStats") or {}).items()
    }
    record = {
        "partitionToWriteStats": stats,
        "compacted": bool(document.get("compacted", False)),
        "extraMetadata": {k: str(v) for k, v in (document.get("extraMetadata") or {}).items()},
        "version": 1,
        "operationType": document.get("operationType"),
    }
    return avro_file.write(SCHEMA, [record])
