"""The timeline: instants of a table, each requested -> inflight -> completed.

An instant's id is a 17-digit UTC time (``yyyyMMddHHmmssSSS``), strictly increasing within a
table; as an integer it is also the assigner's checkpoint id. Files under
``.dynbucket/timeline``: ``<id>.<action>.requested``, ``<id>.<action>.inflight``, and, once
complete, ``<id>.<action>`` holding the instant's metadata (JSON). Completion is one atomic
publish; readers only see completed instants, and only files of completed instants.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import posixpath
from dataclasses import dataclass
from typing import Any

from dynbucket.actors.errors import InstantNotFoundError, TableCorruptedError
from dynbucket.pipeline.format.storage import TableStore

META_DIR = ".dynbucket"
TIMELINE_DIR = f"{META_DIR}/timeline"
ACTIONS = ("commit", "compaction", "index-compaction", "clean", "rollback")
ID_LENGTH = 17


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


@dataclass(frozen=True, order=True)
class Instant:
    """One instant: id, action and state."""

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

    def file_name(self, state: State | None = None) -> str:
        state = self.state if state is None else state
        base = f"{self.id}.{self.action}"
        return base if state == State.COMPLETED else f"{base}.{state.name.lower()}"

    def __str__(self) -> str:
        return f"{self.id} {self.action} ({self.state.name.lower()})"


def parse_instant_file(name: str) -> Instant | None:
    """The instant a timeline file name stands for (None for other files)."""
    parts = name.split(".")
    if len(parts[0]) != ID_LENGTH or not parts[0].isdigit() or len(parts) not in (2, 3):
        return None
    action = parts[1]
    if action not in ACTIONS:
        return None
    if len(parts) == 2:
        return Instant(parts[0], action, State.COMPLETED)
    try:
        return Instant(parts[0], action, State[parts[2].upper()])
    except KeyError:
        return None


def next_instant_id(after: str | None, now: dt.datetime | None = None) -> str:
    """A new instant id: the current UTC millisecond, or ``after + 1`` if the clock is behind."""
    now = now or dt.datetime.now(dt.UTC)
    candidate = now.strftime("%Y%m%d%H%M%S%f")[:-3]
    if after is not None and candidate <= after:
        candidate = str(int(after) + 1)
    return candidate


class Timeline:
    """Reads and changes the timeline of one table."""

    def __init__(self, store: TableStore) -> None:
        self.store = store
        self.dir = store.path(TIMELINE_DIR)

    # --- reading -------------------------------------------------------------------------

    def instants(self) -> list[Instant]:
        """Every instant at its furthest state, oldest first."""
        latest: dict[str, Instant] = {}
        for info in self.store.list_files(self.dir):
            instant = parse_instant_file(info.base_name)
            if instant is None:
                continue
            seen = latest.get(instant.id)
            if seen is not None and seen.action != instant.action:
                raise TableCorruptedError(
                    f"instant {instant.id} appears as {seen.action} and {instant.action}"
                )
            if seen is None or instant.state > seen.state:
                latest[instant.id] = instant
        return sorted(latest.values())

    def completed(self, *actions: str) -> list[Instant]:
        return [i for i in self.instants() if i.completed and (not actions or i.action in actions)]

    def pending(self) -> list[Instant]:
        """Requested or inflight instants (a live writer's, or left by a crashed one)."""
        return [i for i in self.instants() if not i.completed]

    def metadata(self, instant: Instant) -> dict[str, Any]:
        if not instant.completed:
            raise InstantNotFoundError(f"instant {instant} is not completed: it has no metadata")
        path = posixpath.join(self.dir, instant.file_name())
        try:
            return dict(json.loads(self.store.read_bytes(path)))
        except FileNotFoundError as e:
            raise InstantNotFoundError(f"instant {instant} is not on the timeline") from e

    # --- changing ------------------------------------------------------------------------

    def request(self, action: str) -> Instant:
        """Creates a new requested instant with an id greater than every existing one."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        existing = self.instants()
        last = existing[-1].id if existing else None
        while True:
            instant = Instant(next_instant_id(last), action, State.REQUESTED)
            path = posixpath.join(self.dir, instant.file_name())
            if self.store.create_exclusive(path, b""):
                return instant
            last = instant.id

    def start(self, instant: Instant, plan: dict[str, Any] | None = None) -> Instant:
        """requested -> inflight, recording the plan (what the instant will touch)."""
        inflight = Instant(instant.id, instant.action, State.INFLIGHT)
        body = json.dumps(plan or {}, sort_keys=True).encode()
        self.store.write_atomic(posixpath.join(self.dir, inflight.file_name()), body)
        return inflight

    def complete(self, instant: Instant, metadata: dict[str, Any]) -> Instant:
        """inflight -> completed: one atomic publish of the metadata, then tidying."""
        done = Instant(instant.id, instant.action, State.COMPLETED)
        body = json.dumps(
            {"instant": instant.id, "action": instant.action, **metadata},
            sort_keys=True,
            default=str,
        ).encode()
        self.store.write_atomic(posixpath.join(self.dir, done.file_name()), body)
        self._remove_states(instant, (State.REQUESTED, State.INFLIGHT))
        return done

    def discard(self, instant: Instant) -> None:
        """Removes a pending instant's state files (after its files were rolled back)."""
        if instant.completed:
            raise ValueError(f"cannot discard completed instant {instant}")
        # Inflight first: a crash in between leaves a requested instant, still pending.
        self._remove_states(instant, (State.INFLIGHT, State.REQUESTED))

    def _remove_states(self, instant: Instant, states: tuple[State, ...]) -> None:
        for state in states:
            self.store.delete(posixpath.join(self.dir, instant.file_name(state)))
