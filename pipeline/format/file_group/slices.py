"""File groups and file slices: the view a reader builds of a partition's files.

A bucket is one file group (its file id and its files' names: ``hudi/files.py``); its files
are base files and log files; a file slice is a base file and the log files written after it
(they name its instant as their base instant). A file is visible at instant ``t`` when the
instant that wrote it is completed and ``<= t``; a group's slice at ``t`` is its newest
visible base plus the visible logs after it.

A log compaction (``services/compaction.py``) merges a run of a slice's logs into one log of
its own instant, written after them, whose name says the run's first instant: once it is
visible, the logs it merged (of the same group, instants from that one to before its own)
are no longer read; they stay until a clean removes them, and a reader that reads them as
well (hudi-rs) gets the same rows, the merged log restating them.

A log belongs to the newest visible base at or before its base instant (Hudi's rule for
table version 6): a log on a compaction's slice whose base file is not visible yet (the
compaction completes it: ``services/compaction.py``) merges onto the slice before. Logs are
named with non-decreasing base instants in the order they are written
(:meth:`FileSlice.next_log`), so that ordering them by (base instant, version), as Hudi's
readers do, is the order they were written in.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from dynbucket.base.errors import ForeignFileGroupError
from dynbucket.format.file_group import adopted
from dynbucket.format.hudi import files as names
from dynbucket.format.storage.store import TableStore


@dataclass(frozen=True, order=True)
class DataFile:
    """One file of a file group (or of a partition's index)."""

    instant: str
    """The instant that wrote it."""
    path: str
    kind: str  # "base" or "log" (index files: "base" or "delta")
    size: int = field(compare=False)
    file_id: str = field(compare=False, default="")
    base_instant: str = field(compare=False, default="")
    """A log file's slice: the instant of its base file."""
    version: int = field(compare=False, default=0)
    """A log's version in its slice; a base file's: the versions its slice keeps for the
    writes pending at its compaction's planning (``hudi/files.py``)."""
    merges_from: str = field(compare=False, default="")
    """A merged log's first merged instant (``hudi/files.py``)."""
    bucket: int = field(compare=False, default=-1)
    """A data file's bucket, when its file id does not say it (an adopted group's)."""
    until: str = field(compare=False, default="")
    """An index base's or merged delta's end of what it restates: the instants before it
    ("": before its own instant; ``index/file_names.py``)."""

    @property
    def restates_until(self) -> str:
        """The instants this base or merged file restates are those before this one."""
        return self.until or self.instant

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class FileSlice:
    """A file group as a reader sees it: its newest base plus the logs written after it."""

    file_id: str
    base: DataFile | None = None
    logs: list[DataFile] = field(default_factory=list)

    @property
    def bucket(self) -> int:
        """The bucket this file group is (its name says it; an adopted one's is recorded).

        Raises:
            ForeignFileGroupError: a group neither dynbucket nor adoption named.
        """
        for f in self.files:
            if f.bucket >= 0:
                return f.bucket
        if not names.is_bucket_file_id(self.file_id):
            shown = self.files[0].path if self.files else self.file_id
            raise ForeignFileGroupError(
                f"file group {self.file_id!r} ({shown}) was not written by dynbucket and is "
                "not one the table's adoption recorded: another Hudi writer wrote it, or it "
                "is a copy; its keys have no bucket. Remove it if it is a stray copy; to take "
                "in what another Hudi writer wrote, delete .hoodie/.dynbucket/ and adopt the "
                "table again (dynbucket adopt PATH). Nothing was read or written."
            )
        return names.bucket_of(self.file_id)

    @property
    def files(self) -> list[DataFile]:
        return ([self.base] if self.base else []) + self.logs

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def base_instant(self) -> str:
        """The instant of the slice's base file (a base-less slice: its first log's)."""
        if self.base is not None:
            return self.base.instant
        return self.logs[0].base_instant if self.logs else ""

    def next_log(self, instant: str, table_version: int = 6) -> tuple[str, int]:
        """(base instant, version) of the log file ``instant`` writes next in this group:
        on the newest base instant it or its logs name, the version counting that base
        instant's logs; from table version 8 on, as Hudi 1.x names logs, on ``instant``
        itself, version 1 (a reader finds a log's slice by its instant)."""
        if table_version >= 8:
            return instant, 1
        base_instant = max([self.base_instant, *(f.base_instant for f in self.logs)])
        on_it = (f.version for f in self.files if f.base_instant == base_instant)
        return base_instant, max(on_it, default=0) + 1


def data_files(store: TableStore, partition: str) -> list[DataFile]:
    """Every data file in a partition folder, visible or not."""
    return parsed_data_files(store.list_files(store.path(partition)), adopted.load(store))


def parsed_data_files(
    infos: Iterable[pafs.FileInfo], adopted_files: adopted.Adopted = adopted.NONE
) -> list[DataFile]:
    """The data files (base and log files, by Hudi's names) among listed files; those
    Apache Hudi wrote before the table was adopted with what ``adopted_files`` knows of
    them (a log of Hudi's it does not know was written since by another writer, and the
    files of groups a replace commit replaced: left out)."""
    out = []
    for info in infos:
        parsed = names.parse(info.base_name)
        if parsed is None or parsed.file_id in adopted_files.replaced:
            continue
        instant = parsed.instant or adopted_files.logs.get(info.base_name, "")
        if not instant:
            continue
        out.append(
            DataFile(
                instant,
                info.path,
                parsed.kind,
                int(info.size or 0),
                parsed.file_id,
                parsed.base_instant,
                parsed.version,
                parsed.merges_from,
                adopted_files.buckets.get(parsed.file_id, -1),
            )
        )
    return out


def _order(f: DataFile) -> tuple[str, str, str]:
    """``DataFile``'s order as a plain tuple (sorting by it skips the dataclass's
    comparisons: a partition's listing sorts thousands of files)."""
    return (f.instant, f.path, f.kind)


def latest_slice(
    files: Iterable[DataFile], visible: Collection[str]
) -> tuple[DataFile | None, list[DataFile]]:
    """The newest visible base and the visible logs (or index deltas) after it, oldest
    first."""
    seen = sorted((f for f in files if f.instant in visible), key=_order)
    bases = [f for f in seen if f.kind == "base"]
    base = bases[-1] if bases else None
    if base is None:
        return None, after_merged([f for f in seen if f.kind != "base"])
    if base.file_id:
        # A data file group: its logs name this base, or a later one not seen; a write
        # pending when the base's compaction was planned has its log carried onto it,
        # older than the base (``file_group/carry.py``).
        after = [f for f in seen if f.kind != "base" and f.base_instant >= base.instant]
    else:
        # A base restating the instants before its ``until`` leaves the deltas from it after.
        after = [
            f
            for f in seen
            if f.kind != "base"
            and (f.instant >= base.until if base.until else f.instant > base.instant)
        ]
    return base, after_merged(sorted(after, key=lambda f: (f.instant, f.version)))


def after_merged(logs: list[DataFile]) -> list[DataFile]:
    """A slice's visible ``logs`` without those a visible merged log restates."""
    runs = [(f.merges_from, f.restates_until) for f in logs if f.merges_from]
    if not runs:
        return logs
    return [f for f in logs if not any(first <= f.instant < last for first, last in runs)]


def unmerged(logs: list[DataFile]) -> list[DataFile]:
    """A slice's ``logs`` (or a partition's index deltas) written after its newest merged
    one (all of them when none is): what makes a log compaction due, so that a slice
    holding a few merged logs of growing sizes (``services/compaction.py``) is not merged again
    after every write."""
    last = max((i for i, f in enumerate(logs) if f.merges_from), default=-1)
    return logs[last + 1 :]


def file_slices(files: Iterable[DataFile], visible: Collection[str]) -> list[FileSlice]:
    """The slice of every file group with a visible file, by bucket id."""
    groups: dict[str, list[DataFile]] = {}
    for f in files:
        groups.setdefault(f.file_id, []).append(f)
    out = []
    for file_id, group in groups.items():
        base, logs = latest_slice(group, visible)
        if base is not None or logs:
            out.append(FileSlice(file_id, base, logs))
    return sorted(out, key=lambda s: (s.bucket, s.file_id))
