"""Hudi's archived timeline, as table version 6 keeps it: ``.hoodie/archived/``.

Hudi moves old instants off the active timeline (``.hoodie/``) into log files named
``.commits_.archive.<version>_<write token>``, each holding Avro data blocks of
``HoodieArchivedMetaEntry`` records (one per instant and state). Hudi reads an entry's
``commitTime``, ``actionType`` and ``actionState`` by name with the schema the block
carries; the per-action metadata fields (``hoodieCommitMetadata``, ...) are written as
null here: the history names every archived instant, while what each wrote stays in
dynbucket's archive record (``timeline/archive.py``).
"""

from __future__ import annotations

import json
import re

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.avro import Reader, Writer

ARCHIVED_DIR = ".hoodie/archived"
_NAME = re.compile(r"^\.commits_\.archive\.(?P<version>\d+)_(?P<token>\d+-\d+-\d+)$")
#: The metadata fields of Hudi's entry, by action (null in what is written here).
_METADATA_FIELDS = (
    "hoodieCommitMetadata",
    "hoodieCleanMetadata",
    "hoodieCompactionMetadata",
    "hoodieRollbackMetadata",
    "hoodieSavePointMetadata",
    "hoodieCompactionPlan",
    "hoodieCleanerPlan",
    "hoodieReplaceCommitMetadata",
    "hoodieRequestedReplaceMetadata",
    "hoodieInflightReplaceMetadata",
)
_STRINGS = ("commitTime", "actionType", "actionState", "stateTransitionTime")
SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "HoodieArchivedMetaEntry",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            *({"name": n, "type": ["null", "string"], "default": None} for n in _METADATA_FIELDS),
            *({"name": n, "type": ["null", "string"], "default": None} for n in _STRINGS),
            {"name": "version", "type": ["int", "null"], "default": 1},
        ],
    }
)


def file_name(version: int) -> str:
    """The name of the archive log file of ``version`` (1, 2, ...)."""
    return f".commits_.archive.{version}_1-0-1"


def version_of(name: str) -> int | None:
    """The version an archive log file's name says (None: not an archive log file)."""
    m = _NAME.match(name)
    return int(m["version"]) if m is not None else None


def entries_file(entries: list[tuple[str, str, str]], instant: str) -> bytes:
    """An archive log file of one Avro data block: an entry per (instant id, action as Hudi
    names it, state: ``REQUESTED``, ``INFLIGHT`` or ``COMPLETED``)."""
    records = []
    for commit_time, action, state in entries:
        w = Writer()
        for _ in _METADATA_FIELDS:
            w.long(0)  # the null branch
        for value in (commit_time, action, state, commit_time):
            w.long(1)
            w.string(value)
        w.long(0)  # the int branch of version
        w.long(1)
        records.append(w.getvalue())
    return log_file.avro_data_block(records, instant, SCHEMA)


def read_entries(data: bytes) -> list[tuple[str, str, str]]:
    """(instant id, action, state) of every entry of an archive log file written by
    :func:`entries_file`."""
    out = []
    for block in log_file.read_blocks(data):
        if block.type != log_file.AVRO_DATA:
            continue
        for record in log_file.avro_records(block):
            r = Reader(record)
            for _ in _METADATA_FIELDS:
                if r.long() != 0:
                    raise FormatError("archived entry with metadata: not written by dynbucket")
            values = []
            for _ in _STRINGS:
                values.append(r.string() if r.long() == 1 else "")
            out.append((values[0], values[1], values[2]))
    return out
