"""Hudi's commit metadata (``HoodieCommitMetadata``, JSON in timeline layout 1).

What a completed ``commit`` / ``deltacommit`` file holds: the write stats of every file the
instant wrote, per partition, the table's Avro schema and any extra metadata (strings only;
dynbucket keeps its own entries under ``dynbucket.*``), the operation type and whether the
instant is a compaction. Incremental readers find changed file groups from the write stats:
a new base file by ``path``; a log file by ``path`` plus ``baseFile`` (its slice) and
``logFiles``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Hudi's operation types of dynbucket's operations.
OPERATION_TYPES = {
    "upsert": "UPSERT",
    "insert": "INSERT",
    "delete": "DELETE",
    "compact": "COMPACT",
    "logcompact": "LOG_COMPACT",
    "rescale": "CLUSTER",
    "rebalance": "CLUSTER",
}
EXTRA_PREFIX = "dynbucket."


@dataclass(frozen=True)
class WriteStat:
    """One file an instant wrote, as its write stat says it."""

    partition: str
    file_id: str
    path: str
    """Relative to the table's root."""
    prev_commit: str | None
    """The instant of the slice's base file before this write (None for a new group)."""
    num_writes: int
    num_inserts: int
    num_updates: int
    num_deletes: int
    size: int
    base_file: str | None = None
    """A log file's slice: its base file's name."""
    log_version: int | None = None

    def as_json(self) -> dict[str, Any]:
        stat: dict[str, Any] = {
            "fileId": self.file_id,
            "path": self.path,
            "prevCommit": self.prev_commit or "null",
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_updates,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.size,
            "totalWriteErrors": 0,
            "partitionPath": self.partition,
            "fileSizeInBytes": self.size,
        }
        if self.log_version is not None:
            name = self.path.rsplit("/", 1)[-1]
            stat.update(
                baseFile=self.base_file or "",
                logFiles=[name],
                logVersion=self.log_version,
                logOffset=0,
            )
        return stat


def commit_metadata(
    stats: Sequence[WriteStat],
    operation: str,
    schema_json: str,
    extra: Mapping[str, Any],
    compacted: bool = False,
) -> dict[str, Any]:
    """The JSON document of a completed commit (``extra`` values stored as JSON text, under
    ``dynbucket.<key>``: Hudi's extra metadata holds strings only)."""
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for stat in stats:
        by_partition.setdefault(stat.partition, []).append(stat.as_json())
    extra_metadata = {"schema": schema_json}
    for key, value in extra.items():
        extra_metadata[EXTRA_PREFIX + key] = json.dumps(value, sort_keys=True)
    return {
        "partitionToWriteStats": by_partition,
        "compacted": compacted,
        "extraMetadata": extra_metadata,
        "operationType": OPERATION_TYPES.get(operation, operation.upper()),
    }


def extra_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """dynbucket's entries of a commit's extra metadata, decoded."""
    out: dict[str, Any] = {}
    for key, text in (doc.get("extraMetadata") or {}).items():
        if key.startswith(EXTRA_PREFIX):
            try:
                out[key[len(EXTRA_PREFIX) :]] = json.loads(text)
            except (TypeError, ValueError):
                out[key[len(EXTRA_PREFIX) :]] = text
    return out


def written_paths(doc: Mapping[str, Any]) -> list[str]:
    """Paths (relative to the table's root) of every file a commit's write stats list."""
    return [
        stat["path"]
        for stats in (doc.get("partitionToWriteStats") or {}).values()
        for stat in stats
        if stat.get("path")
    ]
