"""The contract every table service keeps, and what a service run returns.

A table service (compaction, log compaction, cleaning, index compaction) is an instant of
its own, in three steps that may run in different threads, processes or machines (the
runner, ``format/services/runner.py``, decides where):

1. ``plan``: under the writer lease, in a moment, decide what to do and record it as the
   plan of a new pending instant (None: nothing to do);
2. ``execute``: without the lease, do the planned work (any process may run it, and run it
   again: the same plan writes the same files);
3. ``finish``: complete the instant with what ``execute`` returned (a compaction takes the
   lease for a moment; the others completed themselves in ``execute``).

A service an executor left pending (it died) is executed again before a new one of its
action is planned: :func:`run_now` writes that order down once. A new service is one
module with a :class:`Service` subclass, a line in ``registry.py`` and its option.
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dynbucket.base.errors import InstantNotFoundError
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.heartbeat import beating
from dynbucket.format.timeline.plans import unattended
from dynbucket.format.timeline.timeline import Instant, Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceResult:
    """What a table service did (``instant`` is None when there was nothing to do)."""

    action: str
    instant: str | None
    files_written: int = 0
    files_removed: int = 0
    rows: int = 0

    def __str__(self) -> str:
        if self.instant is None:
            return f"{self.action}: nothing to do"
        done = [f"{self.files_written} files written"] if self.files_written else []
        done += [f"{self.files_removed} files removed"] if self.files_removed else []
        done += [f"{self.rows} rows"] if self.rows else []
        return f"{self.action} {self.instant}" + (f": {', '.join(done)}" if done else "")


@dataclass(frozen=True)
class Scope:
    """What a service run plans for.

    ``automatic``: as after a write, with the table's thresholds (a compaction of the slices
    with ``hoodie.compact.inline.max.delta.commits`` logs, up to
    ``hoodie.compaction.target.io``, by size; an index compaction by size); else everything
    there is to do now (``Table.compact`` and friends).
    """

    partitions: tuple[str, ...] | None = None
    """The partitions to look at (None: all)."""
    automatic: bool = False
    retain: int | None = None
    """A clean's retained instants (None: ``cleaner.commits-retained``)."""
    min_files: int | None = None
    """An index compaction's threshold (None: ``index.compaction.min-files``)."""
    seen: dict[str, int] | None = field(default=None, compare=False, hash=False)
    """Filled by an index compaction's planning: each partition's count of index files."""
    groups: frozenset[str] | None = field(default=None, compare=False, hash=False)
    """The file groups whose slices the write found due (None: not told). When a pending
    compaction plans each of them, the write made nothing new due and no plan is made
    under the lease (each writer beside others found the same slices due after its own
    write, and planned under the lease for nothing 20 times in 52 writes of four writers)."""


#: The scope of a service due after a write, with the table's thresholds.
AUTOMATIC = Scope(automatic=True)


class Service(ABC):
    """A table service of one timeline action (the module docstring's three steps)."""

    action: ClassVar[str]
    """The instant's action on the timeline (Hudi's name where Hudi has the service)."""

    @abstractmethod
    def automatic(self, spec: TableSpec) -> bool:
        """Whether the writes of a table of ``spec`` run this service when due (its
        option)."""

    @abstractmethod
    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        """Whether a write that wrote ``files`` made this service due (``instants``: the
        table's timeline after it; asked only when ``automatic``): the scope it plans for,
        or None."""

    @abstractmethod
    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        """1. Schedules an instant of this service under the lease; its id (None: nothing
        to do)."""

    @abstractmethod
    def execute(self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> Any:
        """2. Does the planned work of the pending ``instant`` (no lease); what ``finish``
        takes."""

    def finish(
        self, store: TableStore, spec: TableSpec, instant: str, executed: Any
    ) -> ServiceResult:
        """3. Completes ``instant`` with what ``execute`` returned (default: ``execute``
        completed it and returned its result)."""
        assert isinstance(executed, ServiceResult)
        return executed

    def run(
        self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4
    ) -> ServiceResult:
        """2-3 in the caller's thread, beating the instant's heartbeat meanwhile."""
        with beating(store, instant, spec.options.heartbeat_expiry_seconds):
            return self.finish(store, spec, instant, self.execute(store, spec, instant, threads))

    def reads_bytes(self, store: TableStore, timeline: Timeline, found: Instant) -> int:
        """About what executing the pending ``found`` reads (the runner runs a service
        that reads much in a process of its own, not in a thread beside the writes)."""
        return 0

    def left(self, timeline: Timeline) -> list[Instant]:
        """Instants of this service scheduled and not completed, oldest first, that no live
        process executes (left by an executor that died; not one whose scheduler died
        before its plan was recorded: the next writer rolls that back)."""
        return unattended(timeline, self.action)


def run_now(service: Service, store: TableStore, spec: TableSpec, scope: Scope) -> ServiceResult:
    """The service run in the caller's thread: 1. the instants of its action left pending
    (an executor died) executed and completed, oldest first; 2. a new one planned for
    ``scope``; 3. executed and completed."""
    for left in service.left(Timeline(store, spec.options.merge_on_read)):  # 1.
        service.run(store, spec, left.id)
    instant = service.plan(store, spec, scope)  # 2.
    if instant is None:
        return ServiceResult(service.action, None)
    return service.run(store, spec, instant)  # 3.


def merge_is_moot(
    what: str, instant: str, partition: str, planned: list[str], there: Collection[str]
) -> bool:
    """Whether a planned merge of files (``planned``, by name) is moot: some are gone,
    removed by a clean (``there``: the names still there). What restates them is retained,
    so the merge is skipped, not failed for good (merging is never needed to read)."""
    missing = [n for n in planned if n not in there]
    if missing:
        log.warning(
            "%s %s: %s of %s are gone (cleaned); not merged",
            what,
            instant,
            missing,
            partition or "(root)",
        )
    return bool(missing)


def pending_instant(
    store: TableStore, spec: TableSpec, instant: str, action: str
) -> Instant | None:
    """The pending instant ``instant`` of ``action`` (None: completed, rolled back, or of
    another action)."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = next((i for i in timeline.pending() if i.id == instant), None)
    return found if found is not None and found.action == action else None


def resume(
    store: TableStore, spec: TableSpec, instant: str, action: str, executor: str
) -> Transaction:
    """Step 2's opening, the same for every service: the pending ``instant`` of ``action``,
    resumed by a detached executor named ``executor`` (and a suffix of its own).

    Raises:
        InstantNotFoundError: no such instant is pending (completed, rolled back, or of
            another action).
    """
    found = pending_instant(store, spec, instant, action)
    if found is None:
        raise InstantNotFoundError(
            f"no pending {action.replace('-', ' ')} {instant} in {store.uri} (completed, or "
            "rolled back)"
        )
    return Transaction.resume(store, spec, found, f"{executor}-{uuid.uuid4().hex[:8]}")
