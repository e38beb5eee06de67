"""File groups and file slices: names on storage, and the view a reader builds of them.

A bucket is one file group, ``<bucket id, 8 digits>-<uuid tail>`` (Hudi's bucket-index
naming). In a partition directory a group's files are:

* base files ``<file id>_<instant>.parquet`` (the first write of a group, and compactions),
* delta files ``.<file id>_<instant>.delta.parquet``, one per commit that touched the group.

Delta files are hidden (leading dot, like Hudi's log files): plain Spark and
``pyarrow.dataset`` readers of the table directory see only base files. A file is visible at
instant ``t`` when its instant is completed and ``<= t``; a group's slice at ``t`` is its
newest visible base plus the visible deltas after it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.timeline import META_DIR

RLI_DIR = f"{META_DIR}/rli"
_DATA = re.compile(
    r"^(?P<hidden>\.?)(?P<file_id>(?P<bucket>\d{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"_(?P<instant>\d{17})(?P<delta>\.delta)?\.parquet$"
)
_INDEX = re.compile(r"^(?P<instant>\d{17})\.(?P<kind>base|delta)(\.[0-9a-z-]+)?\.parquet$")
#: Temporary files of atomic writes (``.<name>.tmp-<id>``); a killed attempt leaves one.
TEMPORARY = re.compile(r"^\..*\.tmp-[0-9a-f]+$")
_NAMESPACE = uuid.UUID("7d3c0a52-9a57-4c1e-9f4e-0b0d1b1e8a11")


def file_id_for(table_id: str, instant: str, partition: str, bucket: int) -> str:
    """The file id of a new bucket: deterministic in (table, instant, partition, bucket), so a
    retried or speculative task writing the same new bucket names the same file group (I4)."""
    tail = str(uuid.uuid5(_NAMESPACE, f"{table_id}/{instant}/{partition}/{bucket}"))[8:]
    return f"{bucket:08d}{tail}"


def bucket_of(file_id: str) -> int:
    return int(file_id[:8])


def base_name(file_id: str, instant: str) -> str:
    return f"{file_id}_{instant}.parquet"


def delta_name(file_id: str, instant: str) -> str:
    return f".{file_id}_{instant}.delta.parquet"


def index_name(instant: str, kind: str, part: str | None = None) -> str:
    """Index file name; ``part`` tells apart files that several writer tasks of one instant
    write for the same partition."""
    return f"{instant}.{kind}.{part}.parquet" if part else f"{instant}.{kind}.parquet"


@dataclass(frozen=True, order=True)
class DataFile:
    """One file of a file group (or of a partition's index)."""

    instant: str
    path: str
    kind: str  # "base" or "delta"
    size: int = field(compare=False)
    file_id: str = field(compare=False, default="")


@dataclass
class FileSlice:
    """A file group as a reader sees it: its newest base plus the deltas after it."""

    file_id: str
    base: DataFile | None = None
    deltas: list[DataFile] = field(default_factory=list)

    @property
    def bucket(self) -> int:
        return bucket_of(self.file_id)

    @property
    def files(self) -> list[DataFile]:
        return ([self.base] if self.base else []) + self.deltas

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def parse_data_file(name: str) -> tuple[str, str, str] | None:
    """(file id, instant, kind) of a data file name, or None for any other file."""
    m = _DATA.match(name)
    if m is None or bool(m["hidden"]) != bool(m["delta"]):
        return None
    return m["file_id"], m["instant"], "delta" if m["delta"] else "base"


def parse_index_file(name: str) -> tuple[str, str] | None:
    """(instant, kind) of an index file name, or None."""
    m = _INDEX.match(name)
    return (m["instant"], m["kind"]) if m else None


def data_files(store: TableStore, partition: str) -> list[DataFile]:
    """Every data file in a partition directory, visible or not."""
    out = []
    for info in store.list_files(store.path(partition)):
        parsed = parse_data_file(info.base_name)
        if parsed is not None:
            file_id, instant, kind = parsed
            out.append(DataFile(instant, info.path, kind, int(info.size or 0), file_id))
    return out


def index_files(store: TableStore, partition: str) -> list[DataFile]:
    """Every index file of a partition, visible or not."""
    out = []
    for info in store.list_files(store.path(RLI_DIR, partition)):
        parsed = parse_index_file(info.base_name)
        if parsed is not None:
            out.append(DataFile(parsed[0], info.path, parsed[1], int(info.size or 0)))
    return out


def latest_slice(
    files: Iterable[DataFile], visible: Collection[str]
) -> tuple[DataFile | None, list[DataFile]]:
    """The newest visible base and the visible deltas after it, oldest first."""
    seen = sorted(f for f in files if f.instant in visible)
    bases = [f for f in seen if f.kind == "base"]
    base = bases[-1] if bases else None
    after = base.instant if base else ""
    return base, [f for f in seen if f.kind == "delta" and f.instant > after]


def file_slices(files: Iterable[DataFile], visible: Collection[str]) -> list[FileSlice]:
    """The slice of every file group with a visible file, by bucket id."""
    groups: dict[str, list[DataFile]] = {}
    for f in files:
        groups.setdefault(f.file_id, []).append(f)
    out = []
    for file_id, group in groups.items():
        base, deltas = latest_slice(group, visible)
        if base is not None or deltas:
            out.append(FileSlice(file_id, base, deltas))
    return sorted(out, key=lambda s: (s.bucket, s.file_id))
