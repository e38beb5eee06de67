"""The timeline: instants of a table, each requested -> inflight -> completed.

An instant's id is a 17-digit UTC time (``yyyyMMddHHmmssSSS``), strictly increasing within a
table; as an integer it is also the assigner's checkpoint id. Writes and compactions are on
Hudi's timeline (``.hoodie/``, timeline layout 1), spelled as Hudi spells them
(``hudi/instant_files.py``).

A completed write or compaction holds Hudi's commit metadata (JSON). dynbucket's own
services (clean, rollback, index compaction) are recorded under
``.hoodie/.dynbucket/timeline/<id>.<action>[.requested|.inflight]`` (JSON). Completion is one
atomic publish; readers only see completed instants, and only files of completed instants.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dynbucket.base.errors import InstantNotFoundError, TableCorruptedError
from dynbucket.format.hudi import avro_file, commit_avro
from dynbucket.format.hudi.commit import extra_of, written_paths
from dynbucket.format.hudi.instant_files import (
    SPELLED_AS_WRITES,
    State,
    parse_suffix,
    suffix,
)
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR, TIMELINE_DIR
from dynbucket.format.timeline import archive_record
from dynbucket.format.timeline.actions import ACTIONS, OWN_ACTIONS, Action
from dynbucket.format.timeline.archive_record import Archived

ID_LENGTH = 17
_ID_FORMAT = "%Y%m%d%H%M%S%f"


@dataclass(frozen=True, order=True)
class Instant:
    """One instant: id, action (``commit`` is a data write) and state."""

    id: str
    action: str
    state: State

    @property
    def checkpoint(self) -> int:
        """The id as the assigner's checkpoint id."""
        return int(self.id)

    @property
    def completed(self) -> bool:
        return self.state == State.COMPLETED

    def __str__(self) -> str:
        return f"{self.id} {self.action} ({self.state.name.lower()})"


def file_name(
    instant: Instant, state: State, merge_on_read: bool, hudi_dir: str = HOODIE_DIR
) -> str:
    """The timeline file of ``instant`` in ``state`` (relative to the table's root; a
    completed instant of timeline layout 2 also names its completion time: ``Timeline``)."""
    i, action = instant.id, instant.action
    if action in OWN_ACTIONS:
        tail = "" if state == State.COMPLETED else f".{state.name.lower()}"
        return f"{TIMELINE_DIR}/{i}.{action}{tail}"
    return f"{hudi_dir}/{i}.{suffix(action, state, merge_on_read)}"


@functools.lru_cache(maxsize=1 << 16)
def parse_instant_file(name: str, own: bool = False) -> Instant | None:
    """The instant a timeline file name stands for (None for other files; kept per name:
    every look at a timeline parses all its names again, and a name always means the
    same instant). A Hudi
    ``<id>.commit`` (``.deltacommit``) is read as a write here; the timeline makes it a
    compaction (a log compaction) when the instant was requested as one. Timeline layout 2
    names a completed instant ``<id>_<completion time>.<action>``."""
    head, _, tail = name.partition(".")
    if not own and len(head) == 2 * ID_LENGTH + 1 and head[ID_LENGTH] == "_":
        found = parse_suffix(tail)
        if found is None or found[1] != State.COMPLETED or not head.replace("_", "").isdigit():
            return None
        return Instant(head[:ID_LENGTH], *found)
    if len(head) != ID_LENGTH or not head.isdigit():
        return None
    if not own:
        found = parse_suffix(tail)
        return Instant(head, *found) if found else None
    action, _, state = tail.partition(".")
    if action not in OWN_ACTIONS:
        return None
    try:
        return Instant(head, action, State[state.upper()] if state else State.COMPLETED)
    except KeyError:
        return None


def _order(instant: Instant) -> tuple[str, str, int]:
    """Instant order as a plain tuple (sorting by it skips the dataclass's comparisons)."""
    return (instant.id, instant.action, instant.state)


class Visible(frozenset[str]):
    """The instants whose files a view sees: the completed ones on the active timeline
    (up to an ``as_of``), and every archived one (up to the archive's ``floor``) except
    those rolled back. ``instant in visible`` is the test every reader and writer makes."""

    floor: str
    rolled_back: frozenset[str]
    until: str
    """Only instants before it (:meth:`before`; "": any)."""

    def __new__(
        cls,
        ids: Iterable[str] = (),
        floor: str = "",
        rolled_back: Iterable[str] = (),
        until: str = "",
    ) -> Visible:
        self = super().__new__(cls, ids)
        self.floor = floor
        self.rolled_back = frozenset(rolled_back)
        self.until = until
        return self

    def __contains__(self, instant: object) -> bool:
        if frozenset.__contains__(self, instant):
            return True
        return (
            isinstance(instant, str)
            and instant <= self.floor
            and (not self.until or instant < self.until)
            and (instant not in self.rolled_back)
        )

    def before(self, until: str) -> Visible:
        """This view's instants before ``until`` (archived ones too)."""
        end = min(until, self.until) if self.until else until
        return Visible((i for i in self if i < end), self.floor, self.rolled_back, end)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Visible, (frozenset(self), self.floor, self.rolled_back, self.until))


def visible_of(
    completed: list[Instant], as_of: str | None = None, archived: Archived | None = None
) -> Visible:
    """:meth:`Timeline.visible` of an already listed timeline's completed instants."""
    ids = (i.id for i in completed if as_of is None or i.id <= as_of)
    if archived is None:
        return Visible(ids)
    return Visible(ids, archived.floor, archived.rolled_back)


def next_instant_id(after: str | None, now: dt.datetime | None = None) -> str:
    """A new instant id: the current UTC millisecond, or one millisecond after ``after``
    when the clock is behind (always a valid time: Hudi readers parse ids as times)."""
    now = now or dt.datetime.now(dt.UTC)
    candidate = now.strftime(_ID_FORMAT)[:-3]
    if after is not None and candidate <= after:
        later = dt.datetime.strptime(after, _ID_FORMAT[:-2] + "%f") + dt.timedelta(milliseconds=1)
        candidate = later.strftime(_ID_FORMAT)[:-3]
    return candidate


def instant_time(instant_id: str) -> dt.datetime:
    """The time an instant id names (its request, in UTC)."""
    return dt.datetime.strptime(instant_id[:17], _ID_FORMAT[:-2] + "%f").replace(tzinfo=dt.UTC)


def seconds_since(instant_id: str, now: dt.datetime | None = None) -> float:
    """Seconds from the time an instant id names (its request, in UTC) to ``now``."""
    return ((now or dt.datetime.now(dt.UTC)) - instant_time(instant_id)).total_seconds()


#: Where timeline layout 2 (table versions 8 and 9) keeps Hudi's active timeline.
LAYOUT_2_DIR = f"{HOODIE_DIR}/timeline"
#: Where a layout-2 completed instant's document holds its completion time (set at the
#: commit point; not one of Hudi's fields, so not in the Avro file).
COMPLETION_TIME = "completionTime"
_LAYOUTS: dict[str, int] = caches.per_table({})


def layout_of(store: TableStore) -> int:
    """The timeline layout of the table at ``store`` (2: ``.hoodie/timeline/`` is there)."""
    found = _LAYOUTS.get(store.uri)
    if found is None:
        found = 2 if store.exists(store.path(LAYOUT_2_DIR)) else 1
        remember_layout(store, found)
    return found


def remember_layout(store: TableStore, layout: int) -> None:
    """Sets what :func:`layout_of` answers (the table's properties, read on open)."""
    if len(_LAYOUTS) > 1024:
        _LAYOUTS.clear()
    _LAYOUTS[store.uri] = layout


@dataclass(frozen=True)
class HudiInstant:
    """An instant in Hudi's timeline folder, whatever its action (``Timeline`` reads those
    dynbucket writes; a table Hudi wrote also holds replace commits, cleans, rollbacks,
    ...)."""

    id: str
    action: str
    """As its completed file names it (else its first state file)."""
    done: str
    """Its completed file's name ("": pending)."""
    files: tuple[str, ...]
    """Its state files' names."""


def hudi_instants(store: TableStore) -> list[HudiInstant]:
    """Every instant in the Hudi timeline folder of the table at ``store`` (either
    layout), oldest first."""
    folder = LAYOUT_2_DIR if layout_of(store) == 2 else HOODIE_DIR
    found: dict[str, list[str]] = {}
    for info in store.list_files(store.path(folder)):
        head = info.base_name.partition(".")[0]
        layout_2_done = len(head) == 35 and head[17] == "_" and head.replace("_", "").isdigit()
        if (len(head) == ID_LENGTH and head.isdigit()) or layout_2_done:
            found.setdefault(head[:ID_LENGTH], []).append(info.base_name)
    out = []
    for instant, files in sorted(found.items()):
        done = next((n for n in files if _names_completed(n)), "")
        action = (done or files[0]).partition(".")[2].split(".")[0]
        out.append(HudiInstant(instant, action, done, tuple(sorted(files))))
    return out


def _names_completed(name: str) -> bool:
    head, _, tail = name.partition(".")
    return "_" in head or (bool(tail) and "." not in tail and tail != "inflight")


def document_of(data: bytes) -> dict[str, Any]:
    """A completed Hudi instant's metadata: Avro (versions 8 and 9: an object container
    file) or JSON (6).

    Raises:
        ValueError: neither a container file nor a JSON object.
    """
    doc = avro_file.read(data)[1][0] if avro_file.is_container(data) else json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"a JSON {type(doc).__name__}, not an object")
    return doc


#: Completed instants' metadata never changes: parsed once per process.
_METADATA: caches.Kept[tuple[str, str], dict[str, Any]] = caches.Kept(20_000)


class Timeline:
    """Reads and changes the timeline of one table.

    Args:
        store: the table's storage.
        merge_on_read: the table's type; needed to name the files of new writes.
    """

    def __init__(self, store: TableStore, merge_on_read: bool | None = None) -> None:
        self.store = store
        self.merge_on_read = merge_on_read
        self.layout = layout_of(store)
        self.hudi_dir = LAYOUT_2_DIR if self.layout == 2 else HOODIE_DIR
        #: Layout 2: completed instant id -> its file's name (which holds its completion time).
        self._done: dict[str, str] = {}

    # --- reading -------------------------------------------------------------------------

    def instants(self) -> list[Instant]:
        """Every instant at its furthest state, oldest first."""
        latest: dict[str, Instant] = {}
        requested_as: dict[str, str] = {}  # a compaction's or log compaction's id -> action
        for directory, own in ((self.hudi_dir, False), (TIMELINE_DIR, True)):
            for info in self.store.list_files(self.store.path(directory)):
                instant = parse_instant_file(info.base_name, own)
                if instant is None:
                    continue
                if not own and instant.completed and self.layout == 2:
                    self._done[instant.id] = info.base_name
                if instant.action in SPELLED_AS_WRITES:
                    requested_as[instant.id] = instant.action
                seen = latest.get(instant.id)
                if seen is not None and own != (seen.action in OWN_ACTIONS):
                    raise TableCorruptedError(
                        f"instant {instant.id} is both {seen.action} and {instant.action}; "
                        f"remove the files of one of them from {HOODIE_DIR}/ or {TIMELINE_DIR}/"
                    )
                if seen is None or instant.state > seen.state:
                    latest[instant.id] = instant
        out = [
            Instant(i.id, requested_as[i.id], i.state) if i.id in requested_as else i
            for i in latest.values()
        ]
        return sorted(out, key=_order)

    def own_ids(self, action: str) -> frozenset[str]:
        """Ids of dynbucket's own instants of ``action`` (any state), from one listing of
        their small folder: a cheap look at whether a clean was scheduled."""
        out = set()
        for info in self.store.list_files(self.store.path(TIMELINE_DIR)):
            instant = parse_instant_file(info.base_name, True)
            if instant is not None and instant.action == action:
                out.add(instant.id)
        return frozenset(out)

    def completed(self, *actions: str) -> list[Instant]:
        return [i for i in self.instants() if i.completed and (not actions or i.action in actions)]

    def visible(self, as_of: str | None = None) -> Visible:
        """The instants a reader or writer sees (up to ``as_of``): the instants whose files
        make the table, archived ones included. The one place this set is built."""
        return self.visible_of(self.completed(), as_of)

    def visible_of(self, completed: list[Instant], as_of: str | None = None) -> Visible:
        """:meth:`visible` of this timeline's already listed completed instants."""
        return visible_of(completed, as_of, self.archived())

    def archived(self) -> Archived:
        """What archival left of the instants it moved off the active timeline."""
        return archive_record.load(self.store)

    def pending(self) -> list[Instant]:
        """Requested or inflight instants (a live writer's, or left by a crashed one)."""
        return [i for i in self.instants() if not i.completed]

    def raw(self, instant: Instant) -> dict[str, Any]:
        """The JSON document of a completed instant.

        Raises:
            InstantNotFoundError: the instant is not completed (or not there).
            TableCorruptedError: its file is empty, cut short or not JSON.
        """
        if not instant.completed:
            raise InstantNotFoundError(f"instant {instant} is not completed: it has no metadata")
        key = (self.store.uri, f"{instant.id}.{instant.action}")
        doc = _METADATA.get(key)
        if doc is not None:
            return doc
        if self.layout == 2 and instant.action not in OWN_ACTIONS:
            rel = f"{self.hudi_dir}/{self.completed_name(instant)}"
        else:
            rel = file_name(instant, State.COMPLETED, self.merge_on_read is not False)
            if instant.action == Action.COMMIT and not self.store.exists(self.store.path(rel)):
                rel = file_name(instant, State.COMPLETED, False)  # a copy-on-write table's
        path = self.store.path(rel)
        try:
            data = self.store.read_bytes(path)
        except FileNotFoundError as e:
            raise InstantNotFoundError(f"instant {instant} is not on the timeline") from e
        try:
            doc = document_of(data)
        except ValueError as e:
            what = "empty" if not data else f"not a complete JSON document ({e})"
            raise TableCorruptedError(
                f"{path}: the metadata of completed instant {instant.id} is {what}; restore "
                "the file from a backup, or delete it and run `dynbucket rollback` to remove "
                "that instant's files"
            ) from e
        return _METADATA.put(key, doc)

    def completed_name(self, instant: Instant) -> str:
        """Layout 2: the name of a completed instant's file (its completion time is in it)."""
        if instant.id not in self._done:
            self.instants()
        name = self._done.get(instant.id)
        if name is None:
            raise InstantNotFoundError(f"instant {instant} is not on the timeline")
        return name

    def completion_of(self, instant: Instant) -> str:
        """When a completed instant completed: layout 2, the time its file names; layout 1
        (which records none) and dynbucket's own instants, its id."""
        if self.layout != 2 or instant.action in OWN_ACTIONS:
            return instant.id
        return self.completed_name(instant).split(".")[0].split("_")[1]

    def completion_time(self) -> str:
        """Layout 2: a completion time for an instant completing now, after every instant
        and completion time on the timeline (Hudi 1.x slices files by completion times,
        which must follow the order things happened in)."""
        times = [t for name in self._done.values() for t in name.split(".")[0].split("_")]
        times += [i.id for i in self.instants()]
        return next_instant_id(max(times, default=None))

    def plan(self, instant: Instant) -> dict[str, Any]:
        """What a pending instant's inflight file says it will do ({} when it has no
        readable plan, or is no longer pending)."""
        path = self.store.path(
            file_name(instant, State.INFLIGHT, self.merge_on_read is not False, self.hudi_dir)
        )
        try:
            doc = json.loads(self.store.read_bytes(path))
        except (FileNotFoundError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def metadata(self, instant: Instant) -> dict[str, Any]:
        """What a completed instant recorded: ``operation``, ``files`` (each with its absolute
        ``path``) and dynbucket's own entries (``stats``, ``stream``, ``slots``, ...)."""
        doc = self.raw(instant)
        if instant.action in OWN_ACTIONS:
            files = [{**f, "path": self.store.path(f["path"])} for f in doc.get("files", [])]
            return {**doc, "files": files}
        extra = extra_of(doc)
        files = [{"path": self.store.path(p), "kind": "data"} for p in written_paths(doc)]
        files += [
            {"path": self.store.path(p), "kind": "index"} for p in extra.pop("index-files", [])
        ]
        operation = extra.pop("operation", str(doc.get("operationType", "")).lower())
        return {**extra, "operation": operation, "files": files}

    # --- changing ------------------------------------------------------------------------

    def request(self, action: str, listed: Sequence[Instant] | None = None) -> Instant:
        """Creates a new requested instant with an id greater than every existing one
        (``listed``: :meth:`instants` as the caller just listed them, under the lease that
        every request is made under; else listed here)."""
        instant = self.next_request(action, listed)
        while not self.reserve(instant):
            instant = Instant(next_instant_id(instant.id), action, State.REQUESTED)
        return instant

    def next_request(self, action: str, listed: Sequence[Instant] | None = None) -> Instant:
        """The instant :meth:`request` would create, not created yet (:meth:`reserve`)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        existing = self.instants() if listed is None else listed
        last = max((i.id for i in existing), default=None)
        return Instant(next_instant_id(last), action, State.REQUESTED)

    def reserve(self, instant: Instant) -> bool:
        """Creates the requested file of ``instant`` unless it exists (False: the id is
        another's)."""
        # Not flushed: the inflight file written next is, with its folder.
        return self.store.create_exclusive(self._path(instant, State.REQUESTED), b"", durable=False)

    def start(self, instant: Instant, plan: dict[str, Any]) -> Instant:
        """requested -> inflight, recording the plan (what the instant will do)."""
        inflight = Instant(instant.id, instant.action, State.INFLIGHT)
        self.store.write_atomic(
            self._path(inflight, State.INFLIGHT), json.dumps(plan, sort_keys=True).encode()
        )
        return inflight

    def complete(self, instant: Instant, document: dict[str, Any]) -> Instant:
        """inflight -> completed: one atomic, durable publish of ``document``. Hudi's
        instants keep their requested and inflight files, as Hudi's do; dynbucket's own
        records drop them."""
        done = Instant(instant.id, instant.action, State.COMPLETED)
        if self.layout == 2 and instant.action not in OWN_ACTIONS:
            # The completion time was chosen at the commit point (the same in the document
            # its committer and a settler publish: one file either way).
            completion = document.get(COMPLETION_TIME) or self.completion_time()
            name = file_name(done, State.COMPLETED, bool(self.merge_on_read), self.hudi_dir)
            head, _, tail = name.rpartition("/")[2].partition(".")
            self.store.write_atomic(
                self.store.path(self.hudi_dir, f"{head}_{completion}.{tail}"),
                commit_avro.encode(document),
            )
            self._done[instant.id] = f"{head}_{completion}.{tail}"
            return done
        body = json.dumps(document, sort_keys=True, indent=1, default=str).encode()
        self.store.write_atomic(self._path(done, State.COMPLETED), body)
        if instant.action in OWN_ACTIONS:
            self._remove_states(instant, (State.REQUESTED, State.INFLIGHT))
        return done

    def is_published(self, instant: Instant) -> bool:
        """Whether the instant's completed file is there (whatever this view of it says)."""
        done = Instant(instant.id, instant.action, State.COMPLETED)
        if self.layout == 2 and instant.action not in OWN_ACTIONS:
            self.instants()
            return instant.id in self._done
        if instant.action == Action.COMMIT and self.merge_on_read is None:
            return any(
                self.store.exists(self.store.path(file_name(done, State.COMPLETED, m)))
                for m in (True, False)
            )
        return self.store.exists(self._path(done, State.COMPLETED))

    def forget_archived(self, instant: Instant) -> None:
        """Removes an archived instant from the active timeline: its requested and inflight
        files first, its completed file last (a crash in between leaves it completed,
        never pending)."""
        self._remove_states(instant, (State.REQUESTED, State.INFLIGHT, State.COMPLETED))

    def discard(self, instant: Instant) -> None:
        """Removes a pending instant's state files (after its files were rolled back)."""
        if instant.completed:
            raise ValueError(f"cannot discard completed instant {instant}")
        # Inflight first: a crash in between leaves a requested instant, still pending.
        self._remove_states(instant, (State.INFLIGHT, State.REQUESTED))

    def _path(self, instant: Instant, state: State) -> str:
        if self.merge_on_read is None and instant.action == Action.COMMIT:
            raise ValueError("Timeline(merge_on_read=...) is needed to write a commit")
        return self.store.path(file_name(instant, state, bool(self.merge_on_read), self.hudi_dir))

    def _remove_states(self, instant: Instant, states: tuple[State, ...]) -> None:
        for state in states:
            if state == State.COMPLETED and self.layout == 2 and instant.action not in OWN_ACTIONS:
                self.store.delete(self.store.path(self.hudi_dir, self.completed_name(instant)))
                self._done.pop(instant.id, None)
                continue
            for merge_on_read in (True, False):
                rel = file_name(instant, state, merge_on_read, self.hudi_dir)
                self.store.delete(self.store.path(rel))


#: A compaction's plan (and commit) entry: the data writes pending at its planning, whose
#: logs it leaves out and carries onto its slices at the versions it keeps for them.
WRITING = "writing"


def compaction_writing(timeline: Timeline, instant: Instant) -> tuple[str, ...]:
    """The data writes pending when the compaction ``instant`` was planned, oldest first
    (its plan's ``writing``; a completed one's commit says it too; () for a plan made
    before it was recorded)."""
    entry = timeline.plan(instant).get(WRITING)
    if entry is None and instant.completed:
        entry = timeline.metadata(instant).get(WRITING)
    return tuple(sorted(entry or ()))
