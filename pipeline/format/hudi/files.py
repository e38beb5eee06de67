"""Names of file groups and of data files in a partition: base files and log files.

* file id ``<bucket id, 8 digits>-<uuid tail>`` (Hudi's bucket-index naming: Hudi's readers
  and bucket-index writers take the bucket from the first 8 characters);

* base file ``<file id>_<write token>_<instant>.parquet``; a compaction's base file's
  token is ``0-<instant>-<reserved>``: the first ``reserved`` log versions of its slice are
  kept for the writes pending when it was planned (``services/compaction.py``);
* log file ``.<file id>_<base instant>.log.<version>_<write token>``: ``base instant`` is the
  instant of the base file of the slice it belongs to, ``version`` counts the slice's log
  files from 1.

The write token (``<task>-<stage>-<attempt>`` in Hudi's writers) is ``0-<instant>-0`` here:
the same for every attempt of a task, so a retried or speculative attempt writes the same
names (I4), and naming the instant that wrote a log file (which its name otherwise does not
say) so that rolling an instant back finds its files by name. A log compaction's merged log
(``file_group/merged_log.py``) is ``0-<instant>-<first>``: it restates the slice's logs of
instants from ``first`` to before its own, which readers then skip (its token sorts before
those of later writers' logs of the same version, as Hudi's readers order logs).
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass

from dynbucket.base.columns import MAX_BUCKET_ID

_ID = r"(?P<file_id>[^_/]+)"
_TOKEN = r"(?P<token>\d+-(?P<writer>\d+)-(?P<attempt>\d+))"
_BASE = re.compile(rf"^{_ID}_{_TOKEN}_(?P<instant>\d{{17}})\.parquet$")
_LOG = re.compile(rf"^\.{_ID}_(?P<base>\d{{17}})\.log\.(?P<version>\d+)_{_TOKEN}$")
PARTITION_METADATA = ".hoodie_partition_metadata"
_NAMESPACE = uuid.UUID("7d3c0a52-9a57-4c1e-9f4e-0b0d1b1e8a11")


def file_id_for(table_id: str, instant: str, partition: str, bucket: int) -> str:
    """The file id of a new bucket: deterministic in (table, instant, partition, bucket), so a
    retried or speculative task writing the same new bucket names the same file group (I4)."""
    tail = str(uuid.uuid5(_NAMESPACE, f"{table_id}/{instant}/{partition}/{bucket}"))[8:]
    return f"{bucket:08d}{tail}"


_BUCKET_FILE_ID = re.compile(r"^\d{8}-")


def is_bucket_file_id(file_id: str) -> bool:
    """Whether ``file_id`` is of the form dynbucket names buckets by (``<8 digits>-...``);
    Hudi's own writers name file groups by a UUID."""
    return _BUCKET_FILE_ID.match(file_id) is not None and int(file_id[:8]) <= MAX_BUCKET_ID


def bucket_of(file_id: str) -> int:
    """The bucket id a file id names (:func:`is_bucket_file_id`)."""
    return int(file_id[:8])


def write_token(instant: str) -> str:
    return f"0-{instant}-0"


def base_name(file_id: str, instant: str, reserved: int = 0) -> str:
    """A base file's name; ``reserved``: the log versions its slice keeps for the writes
    pending when its compaction was planned (their logs go there when they complete)."""
    return f"{file_id}_0-{instant}-{reserved}_{instant}.parquet"


def log_name(
    file_id: str, base_instant: str, version: int, instant: str, merges_from: str = ""
) -> str:
    """A log file's name; ``merges_from``: a merged log's first merged instant."""
    token = f"0-{instant}-{merges_from}" if merges_from else write_token(instant)
    return f".{file_id}_{base_instant}.log.{version}_{token}"


@dataclass(frozen=True)
class ParsedName:
    """What a data file's name says."""

    file_id: str
    kind: str
    """``base`` or ``log``."""
    instant: str
    """The instant that wrote the file (empty: a log Hudi wrote, whose name does not say:
    ``file_group/adopted.py`` knows it)."""
    base_instant: str
    """The instant of the slice's base file (a base file's own instant)."""
    version: int = 0
    """A log file's version within its slice; a base file's: the log versions its slice
    keeps for the writes pending when its compaction was planned (its token says it)."""
    merges_from: str = ""
    """A merged log's first merged instant (it restates its slice's logs from it on)."""


@functools.lru_cache(maxsize=1 << 16)
def parse(name: str) -> ParsedName | None:
    """What ``name`` says, or None for a file that is not a data file (kept per name: every
    listing of a partition parses its names again)."""
    m = _BASE.match(name)
    if m is not None:
        reserved = int(m["attempt"]) if m["writer"] == m["instant"] else 0
        return ParsedName(m["file_id"], "base", m["instant"], m["instant"], reserved)
    m = _LOG.match(name)
    if m is None:
        return None
    version = int(m["version"])
    if len(m["writer"]) != 17:  # Hudi's token (a Spark task's): the name does not say
        return ParsedName(m["file_id"], "log", "", m["base"], version)
    merges_from = m["attempt"] if len(m["attempt"]) == 17 else ""
    return ParsedName(m["file_id"], "log", m["writer"], m["base"], version, merges_from)
