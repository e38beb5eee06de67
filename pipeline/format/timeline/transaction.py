"""One instant of a writer: lease, instant, files, and an atomic commit that checks what it read.

1. Take the table's writer lease (I9).
2. Settle the instants another writer left pending (``outcome``): roll each back (its files
   removed, I5) unless its writer had decided it committed, then publish it. A pending
   compaction is not settled: later writes already put logs onto its slice, and the next
   compaction run executes it (``services/compaction.py``).
3. Note the latest completed instant and read its metadata (a write never builds on a
   commit that does not read); the commit's precondition is the latest completed instant
   not completed beside the writes (``DETACHED_ACTIONS``: compactions of slices or of the
   index, cleans; they move no row).
4. Request and start a new instant; write files named with it.
5. Commit: the lease is still ours and the timeline still ends at the noted instant
   ("expected X, found Y"); then the commit point, the exclusive create of the instant's
   outcome (refused when a newer writer rolled the instant back while this one stalled:
   a pause of any length ends in a refused commit, never a lost one); then one atomic
   publish of the metadata. Any failure before the commit point rolls the instant back,
   so nothing of it is ever read; after it, the instant is committed and is published
   (by this writer, or else by the next one).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    ConcurrentWriteError,
    PublishPendingError,
    TableCorruptedError,
)
from dynbucket.format.file_group.carry import carry_logs
from dynbucket.format.hudi.commit import commit_metadata, extra_of
from dynbucket.format.hudi.instant_files import HUDI_ACTIONS
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline import conflicts, heartbeat, outcome, plans, settle
from dynbucket.format.timeline.actions import COMPACTIONS, DETACHED_ACTIONS, Action
from dynbucket.format.timeline.caches_token import token, writes_token
from dynbucket.format.timeline.heartbeat import Heartbeat
from dynbucket.format.timeline.lanes import ALONE, Lanes, lane_of, plan_fields
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.timeline import (
    COMPLETION_TIME,
    Instant,
    State,
    Timeline,
    seconds_since,
)
from dynbucket.format.timeline.written import WrittenFile

log = logging.getLogger(__name__)


@dataclass
class Transaction:
    """An open instant; commit or abort it (``with`` aborts when the block raises)."""

    store: TableStore
    spec: TableSpec
    timeline: Timeline
    lock: WriterLock | None
    """The writer lease (None: a detached instant, completed without it: ``resume``)."""
    instant: Instant
    based_on: str | None
    """The latest completed instant when the transaction began: the commit's precondition."""
    operation: str
    visible: frozenset[str] = frozenset()
    """The completed instants when the transaction began: what its writes build on (the
    timeline cannot change under it: it holds the writer lease)."""
    files: list[WrittenFile] = field(default_factory=list)
    settled: dict[str, str] = field(default_factory=dict)
    """Other writers' pending instants this one settled: id -> what ``settle`` did."""
    plan: dict[str, Any] = field(default_factory=dict)
    """What the inflight instant says it will do (readers of a pending clean read it)."""
    expected: str | None = None
    """The latest completed instant not of ``DETACHED_ACTIONS``: the commit's precondition."""
    compacting: dict[str, str] = field(default_factory=dict)
    """File id -> the pending compaction or log compaction that plans its group (no other
    is planned on it)."""
    last_write: str | None = None
    """The latest completed data write (``commit`` action): the instant that last changed
    which keys the table has (services never do)."""
    started: float = field(default_factory=time.perf_counter)
    done: bool = False
    owner: str = ""
    """Who decides this instant's outcome (the lease's owner, or a detached executor)."""
    heartbeat: Heartbeat | None = None
    """Several writers: the instant's heartbeat while it is written without the lease."""
    beside: tuple[str, ...] = ()
    """Several writers: data writes other writers completed while this one was written
    (checked, none conflicting): the keys they placed are not in this writer's caches."""
    writes_seen: tuple[str, ...] = ()
    """Several writers: the data writes completed when this one began."""
    writes_pending: tuple[str, ...] = ()
    """Several writers: the data writes pending when this one began (older ids: one that
    completes after this commit, then is archived, is on no later listing at all)."""
    unseen_from: str | None = None
    """Several writers: the oldest instant pending when this one began (completed later, it
    is one this write did not see; archived before this one commits, it cannot be checked)."""
    borrowed: bool = False
    """The lease was the caller's, held before the instant began: it stays held after."""
    lanes: tuple[int, int] = ALONE
    """Several writers: this write's lane ``L`` of ``W``: the buckets it may put new keys
    into (``lanes.py``)."""
    writer_lanes: Lanes | None = None
    """Several writers: its writer's lanes, told of the lanes of commits beside it."""
    published: bool = True
    """The instant's files are on the timeline (False: begun ``deferred``, not yet)."""
    data_write: str | None = None
    """The latest completed data write when it began (the assigners' latest successful
    checkpoint: a service completed since moved no key)."""

    @classmethod
    def begin(
        cls,
        store: TableStore,
        spec: TableSpec,
        action: str,
        operation: str,
        lock: WriterLock | None = None,
        lease_seconds: float | None = None,
        hold: bool = True,
        lanes: Lanes | None = None,
        deferred: bool = False,
    ) -> Transaction:
        """Begins an instant of ``action`` under the table's writer lease. ``hold=False``
        (a data write, with several writers: ``TableOptions.optimistic``): the lease is
        released once the instant is started, and the instant beats a heartbeat until it
        commits or aborts (the commit takes the lease again and checks for conflicts);
        ``lanes``: the writer's, which picks the instant's lane among the live writers'.
        ``lock`` held already (an adoption's): the caller's, still held when the instant
        ends. ``deferred``: the instant's id is chosen, its files are not written until
        :meth:`publish_plan` (a service's schedule: one that finds nothing to do writes
        nothing, so nothing is left to remove)."""
        options = spec.options
        borrowed = lock is not None and lock.held
        lease = (lease_seconds, 0.0) if lease_seconds else options.lease()
        lock = lock or WriterLock.for_table(store, lease)
        lock.acquire()
        try:
            timeline = Timeline(store, options.merge_on_read)
            settled = settle.settle_superseded(store, timeline, lock) if lock.superseded else {}
            listed = timeline.instants()  # one listing serves the whole begin (the lease is
            # held: no instant is requested beside it; one completed beside it since is seen
            # by the commit's checks)
            pending = [i for i in listed if not i.completed]
            # A service's instant whose scheduler died before its plan was recorded has
            # no executor and nothing to execute: it is settled as a write is. With
            # several writers, a write instant whose heartbeat beats is a live writer's.
            settled |= {
                p.id: settle.settle(store, timeline, p, lock.owner)
                for p in pending
                if (p.action not in DETACHED_ACTIONS or not plans.executable(store, timeline, p))
                and not (options.optimistic and heartbeat.is_alive(store, p.id))
            }
            if settled:
                listed = timeline.instants()
                pending = [i for i in listed if not i.completed]
            compacting = plans.compacting(timeline, pending)
            completed = [i for i in listed if i.completed]
            writes = [i for i in completed if i.action == Action.COMMIT]
            pending_writes = tuple(i.id for i in pending if i.action == Action.COMMIT)
            based_on = completed[-1].id if completed else None
            if completed:
                # A latest commit that does not read fails every read; a write on top of it
                # would commit into a table nobody can read (TableCorruptedError, its fix).
                timeline.raw(completed[-1])
            if deferred:
                instant = timeline.next_request(action, listed)
            else:
                instant = timeline.request(action, listed)
            plan: dict[str, Any] = {"operation": operation, "based-on": based_on}
            beside = options.optimistic and not hold
            chosen = _lane(timeline, writes, pending, lanes) if beside and lanes else ALONE
            plan.update(plan_fields(lanes if beside else None, chosen))
            unseen_from = min((p.id for p in pending), default=None) if beside else None
            if beside:  # what a clean keeps for this write (clean.py)
                plan[UNSEEN_FROM] = unseen_from or instant.id
            if action in HUDI_ACTIONS:  # an inflight Hudi instant holds commit metadata too
                plan = commit_metadata([], operation, spec.avro_schema(), plan)
            if not deferred:
                instant = _published(timeline, lock, instant, plan, reserve=False)
            tx = cls(
                store,
                spec,
                timeline,
                lock,
                instant,
                based_on,
                operation,
                timeline.visible_of(completed),
                plan=plan,
                settled=settled,
                expected=latest_write(completed),
                compacting=compacting,
                last_write=writes_token(completed, options.optimistic, pending_writes),
                owner=lock.owner,
                borrowed=borrowed,
                lanes=chosen,
                writer_lanes=lanes if beside else None,
                published=not deferred,
                data_write=writes[-1].id if writes else None,
            )
            if options.optimistic:
                tx.writes_seen = tuple(i.id for i in writes)
                tx.writes_pending = pending_writes
            if options.optimistic and not hold:
                tx.unseen_from = unseen_from
                tx.heartbeat = Heartbeat(store, instant.id, options.heartbeat_expiry_seconds)
                tx.heartbeat.start()
                lock.release()
            return tx
        except BaseException:
            if not borrowed:
                lock.release()
            raise

    @classmethod
    def resume(
        cls, store: TableStore, spec: TableSpec, instant: Instant, owner: str
    ) -> Transaction:
        """A pending instant scheduled by another transaction (``hand_off``), to complete
        without the writer lease (``DETACHED_ACTIONS``): a compaction or an index
        compaction, whose files nobody else writes and which move no row, or a clean.
        ``owner`` names this executor in the instant's outcome."""
        timeline = Timeline(store, spec.options.merge_on_read)
        if not plans.executable(store, timeline, instant):  # a writer rolled it back: write nothing
            raise ConcurrentWriteError(
                f"{instant.action} {instant.id} of {store.uri} was rolled back (its scheduler "
                "stalled past its lease); it is not executed"
            )
        plan = timeline.plan(instant)
        recorded = {**plan, **extra_of(plan)}
        based_on, operation = recorded.get("based-on"), str(recorded.get("operation", ""))
        tx = cls(store, spec, timeline, None, instant, based_on, operation, plan=plan)
        tx.owner = owner
        return tx

    @classmethod
    def take_over(
        cls,
        store: TableStore,
        spec: TableSpec,
        instant: Instant,
        lease_seconds: float | None = None,
    ) -> Transaction:
        """A pending instant scheduled by another transaction, to complete under the writer
        lease (a compaction's last step: ``services/compaction.py``). The lease names the
        instant: a writer that takes it over once it expired (its holder paused past its
        checks) settles the instant first, so the holder's commit point is refused when it
        wakes (a compaction completed then would leave the logs that writer put on its
        groups' old slices meanwhile on slices no reader reads)."""
        tx = cls.resume(store, spec, instant, "")
        lease = (lease_seconds, 0.0) if lease_seconds else spec.options.lease()
        lock = WriterLock.for_table(store, lease)
        lock.acquire(instant=instant.id)
        tx.lock, tx.owner = lock, lock.owner
        tx.timeline = Timeline(store, spec.options.merge_on_read)
        if instant.id in lock.superseded:
            # Another executor of this instant held the lease: this one finishes it, and
            # its commit point fences the other (``_decide``).
            lock.settled((instant.id,))
        if lock.superseded:
            settle.settle_superseded(store, tx.timeline, lock)
        completed = tx.timeline.completed()
        tx.expected = latest_write(completed)
        tx.visible = tx.timeline.visible_of(completed)
        return tx

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if not self.done:
            self.abort()

    @property
    def id(self) -> str:
        return self.instant.id

    def record_plan(self, entries: dict[str, Any]) -> None:
        """Adds ``entries`` to the inflight instant's plan, before the instant acts on them
        (a clean says which instants it keeps before it removes a file)."""
        if self.lock is not None:
            # A scheduler paused past its lease must not write a plan onto an instant the
            # next writer settled (its outcome then fences the executor too).
            self.lock.verify()
        self.plan = {**self.plan, **entries}
        if not self.published:
            assert self.lock is not None  # only a begin defers
            self.instant = _published(
                self.timeline, self.lock, self.instant, self.plan, reserve=True
            )
            self.published = True
            return
        self.instant = self.timeline.start(self.instant, self.plan)

    def add(self, written: WrittenFile) -> None:
        self.files.append(written)

    def commit(self, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Publishes the instant atomically; returns its metadata."""
        if self.done:
            raise CommitFailedError(f"instant {self.instant.id} is already finished")
        metadata = metadata or {}
        if self.lock is None:
            return self._commit_detached(metadata)
        try:
            if self.heartbeat is not None:
                self._check_beside_writers(metadata)
            else:
                self._check_alone()
            body = self._document(metadata)
            assert self.lock is not None
            standing = self._decide(body)
        except CommitStateUnknownError:
            # Perhaps committed: nothing of it may be removed. It stays pending; the next
            # writer settles it by its outcome (published if committed, else rolled back).
            self.done = True
            self._release()
            raise
        except BaseException as e:
            self.abort()
            if isinstance(e, CommitFailedError | ConcurrentWriteError):
                raise
            raise CommitFailedError(f"commit of instant {self.instant.id} failed: {e}") from e
        self.done = True  # committed: from here on nothing of it is rolled back
        self._log_committed(metadata)
        if standing is not None:
            self._release()
            return standing
        try:
            outcome.publish(self.store, self.timeline, self.instant, body, self._index_entries())
        except Exception as e:
            raise PublishPendingError(
                f"instant {self.instant.id} is committed, but publishing it failed ({e}); "
                "readers see it once the next writer (or `dynbucket rollback`) publishes it: "
                "do not write it again"
            ) from e
        finally:
            self._release()
        return body

    def _log_committed(self, metadata: dict[str, Any]) -> None:
        """What an instant committed, for a failed run's logs (``tests/writers.py``)."""
        if log.isEnabledFor(logging.DEBUG):
            files = [f.relative(self.store) for f in self.files]
            log.debug(
                "committed %s %s (based on %s): %s %s",
                self.instant.action,
                self.id,
                self.based_on,
                files,
                metadata,
            )

    def _check_alone(self) -> None:
        """One writer: the lease is still ours and the timeline still ends at the noted
        instant."""
        assert self.lock is not None
        self.lock.verify()
        found = latest_write(self.timeline.completed())
        if found != self.expected:
            raise ConcurrentWriteError(
                f"commit of {self.instant.id} expected the latest completed instant to be "
                f"{self.expected}, found {found}: another writer committed in between"
            )

    def _check_beside_writers(self, metadata: dict[str, Any]) -> None:
        """Several writers: takes the lease (naming this instant, so a writer taking it over
        settles this instant first) and checks this instant against every instant completed
        since it began (``conflicts.check``: ``WriteConflictError``)."""
        assert self.lock is not None and self.heartbeat is not None
        self._verify_not_settled()
        mor = self.spec.options.merge_on_read
        # 1. Without the lease: the check against what completed so far (a conflict found
        # here is one under the lease too), which makes this write's footprint if anything
        # completed or is pending beside it.
        early = conflicts.check(self, Timeline(self.store, mor), metadata)
        # 2. Under the lease: only what completed since step 1 (the lease is held for the
        # commit, not for reading other writers' footprints).
        self.lock.acquire(instant=self.id)
        timeline = Timeline(self.store, mor)
        if self.lock.superseded:
            settle.settle_superseded(self.store, timeline, self.lock)
        self.lock.verify()
        self._verify_not_settled()
        late = conflicts.check(self, timeline, metadata, early.footprint, early.completed)
        self.beside = tuple(late.writes)
        self.timeline = timeline  # the completion time follows what is on it now
        # 3. Logs on slices a compaction completed meanwhile go onto its new slices.
        if onto := {**early.carry, **late.carry}:
            slots = {**early.slots, **late.slots}
            self.files = carry_logs(self.store, self.spec, self.id, self.files, onto, slots)
            log.info("instant %s: %d log(s) carried onto compacted slices", self.id, len(onto))

    def _verify_not_settled(self) -> None:
        """Several writers: refuses the commit of an instant whose heartbeat lapsed while
        this writer stalled, once another writer decided it rolled back. One that nobody
        settled goes on: the commit point (the outcome's exclusive create) decides between
        this commit and a settler that comes later, which then publishes it. (Refusing every
        lapse starved a writer paused again and again while alone on the table.)"""
        assert self.heartbeat is not None
        if not self.heartbeat.lapsed():
            return
        found = outcome.read(self.store, self.id)
        if found is not None and found.state == outcome.ROLLED_BACK:
            raise ConcurrentWriteError(
                f"instant {self.id} of {self.store.uri}: its writer stalled past its heartbeat "
                f"(heartbeat.expiry-seconds={self.heartbeat.expiry_seconds:g}) and writer "
                f"{found.writer} rolled it back; it is not committed"
            )
        log.info("instant %s: its writer stalled past its heartbeat, unsettled", self.id)

    def caches_match(self) -> str | None:
        """After the commit: what a writer's caches match now that they took this instant's
        mappings (``write/writer.py``): the instant itself with one writer; with several,
        the set of data writes they reflect (None: they miss keys another writer placed
        beside this instant)."""
        if not self.spec.options.optimistic:
            return self.id
        if self.beside:
            return None
        return token([*self.writes_seen, self.id], self.writes_pending)

    def fenced(self) -> bool:
        """Several writers: whether this instant's heartbeat lapsed in this writer's view, or
        another writer decided it rolled back (this one stalled: whatever failed in its
        write since, it is a conflict to write again, not a fault)."""
        if self.heartbeat is None:
            return False
        if self.heartbeat.lapsed():
            return True
        found = outcome.read(self.store, self.id)
        return found is not None and found.state == outcome.ROLLED_BACK

    def _commit_detached(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Completes a detached instant; another executor of the same plan may have
        completed it first (then its document stands, and is returned)."""
        body = self._document(metadata)
        self.done = True
        try:
            standing = self._decide(body)
            if standing is not None:
                return standing
        except ConcurrentWriteError:
            found = outcome.read(self.store, self.instant.id)
            if found is not None and found.state == outcome.COMMITTED:
                body = found.document or body
            elif self.timeline.is_published(self.instant):
                return self.timeline.raw(
                    Instant(self.instant.id, self.instant.action, State.COMPLETED)
                )
            else:
                raise
        self._log_committed(metadata)  # decided: a kill before here leaves it pending
        outcome.publish(self.store, self.timeline, self.instant, body, self._index_entries())
        return body

    def _index_entries(self) -> dict[str, pa.Table]:
        """The entries of the index files this process wrote for the instant, by path (the
        metadata table's record index takes them from memory, not from the files)."""
        held = (f for f in self.files if f.kind == "index" and f.entries is not None)
        return {f.path: f.entries for f in held}

    def _decide(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The commit point (module doc, 5.); None: this commit decided the instant. A
        detached instant may have another executor (``DETACHED_ACTIONS``), whose commit
        outcome is forgotten once it published: an executor paused before this point
        would then decide it a second time, and publish it again (a second completed file
        under layout 2, or, once archival took the instant, a completed file below the
        archive's floor, where Hudi's readers take the active timeline to begin). So a
        detached instant found completed after this decision takes back the decision and
        returns the document that stands (archived: this one, never published)."""
        outcome.decide_commit(self.store, self.instant.id, body, self.owner)
        if self.instant.action not in DETACHED_ACTIONS:
            return None
        archived = self.instant.id <= self.timeline.archived().floor
        if not archived and not self.timeline.is_published(self.instant):
            return None
        outcome.forget(self.store, self.instant.id)
        log.info("%s %s was completed by another executor", self.instant.action, self.id)
        if archived:
            return body
        return self.timeline.raw(Instant(self.instant.id, self.instant.action, State.COMPLETED))

    def _document(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """What the completed instant holds: Hudi's commit metadata for writes and
        compactions, dynbucket's own record for its services."""
        extra = {
            "operation": self.operation,
            "based-on": self.based_on,
            "seconds": round(time.perf_counter() - self.started, 3),
            **plan_fields(self.writer_lanes, self.lanes),
            **metadata,
        }
        data = [f for f in self.files if f.kind != "index"]
        index = [f.relative(self.store) for f in self.files if f.kind == "index"]
        if self.instant.action in HUDI_ACTIONS:
            stats = [f.write_stat(self.store) for f in data]
            doc = commit_metadata(
                stats,
                self.operation,
                self.spec.avro_schema(),
                {**extra, "index-files": index},
                compacted=self.instant.action == Action.COMPACTION,
            )
            if self.timeline.layout == 2:  # chosen here, at the commit point (timeline.py)
                doc[COMPLETION_TIME] = self.timeline.completion_time()
            return doc
        files = [
            {"path": f.relative(self.store), "kind": f.kind, "partition": f.partition}
            for f in self.files
        ]
        return {**extra, "files": files}

    def cancel(self) -> None:
        """Ends an instant that wrote nothing (a service with nothing to do): its timeline
        entries go, without the search for its files that a rollback makes."""
        if self.done:
            return
        self.done = True
        try:
            if self.published:
                self.timeline.discard(self.instant)
        finally:
            self._release()

    def hand_off(self) -> None:
        """Releases the lease and leaves the instant pending, for a process that completes
        it without the lease (a scheduled compaction: ``services/compaction.py``)."""
        self.done = True
        self._release()

    def _release(self) -> None:
        if self.lock is not None and not self.borrowed:
            self.lock.release()
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def abort(self) -> None:
        """Rolls back everything this instant wrote and releases the lease."""
        if self.done:
            return
        self.done = True
        if self.lock is None or self.instant.action in COMPACTIONS:
            # Stays pending: the next run executes it again (a compaction is never rolled
            # back: another executor may be completing it).
            self._release()
            return
        try:
            settle.rollback_instant(self.store, self.timeline, self.instant)
        finally:
            self._release()


#: The plan entry of a data write beside other writers: the oldest instant pending when it
#: began, or its own when none was. The slices it reads are the newest of the instants
#: completed then, all of them below this one: a clean keeps what a reader below it reads.
UNSEEN_FROM = "unseen-from"


def schedule(
    store: TableStore,
    spec: TableSpec,
    action: str,
    operation: str,
    plan: Callable[[Transaction], dict[str, Any] | None],
) -> str | None:
    """Schedules a service that runs beside the writes (``DETACHED_ACTIONS``): begins an
    instant of ``action`` under the lease, records what ``plan`` returns as its plan, and
    releases the lease with the instant pending; returns its id. ``plan`` returning None
    (nothing to do) or raising ends the instant, which wrote nothing but its timeline
    entries."""
    txn = Transaction.begin(store, spec, action, operation, deferred=True)
    try:
        entries = plan(txn)
        if entries is None:
            txn.cancel()
            return None
        txn.record_plan({**entries, plans.SCHEDULED: True})
    except BaseException:
        txn.cancel()
        raise
    txn.hand_off()
    return txn.id


def _published(
    timeline: Timeline, lock: WriterLock, instant: Instant, plan: dict[str, Any], reserve: bool
) -> Instant:
    """``instant`` (requested under ``lock``; ``reserve``: chosen, not created yet) inflight
    on the timeline with ``plan``.

    A begin paused past its lease between its look at the timeline and the create of its
    instant made an instant the writers since never saw: its id may be below theirs, even
    below an archival's floor (taken for an archived leftover, its files would read as
    committed). It goes; the begin fails as a lost lease does. Once the lease is seen held
    after the create, no writer or archival came in between, and from then on the instant
    is pending where all see it."""
    if reserve and not timeline.reserve(instant):
        # Created since the look, under the lease: only a writer holding it now does that.
        lock.verify()
        raise ConcurrentWriteError(
            f"instant {instant.id} of {timeline.store.uri} was created by another writer"
        )
    try:
        started = timeline.start(instant, plan)
        lock.verify()
    except BaseException:
        try:
            timeline.discard(instant)
        except Exception as e:  # what stays is requested without a plan: the next begin settles it
            log.warning("instant %s of %s not removed: %s", instant.id, timeline.store.uri, e)
        raise
    return started


def latest_write(completed: list[Instant]) -> str | None:
    """The latest of ``completed`` not completed beside the writes (``DETACHED_ACTIONS``):
    a commit's precondition."""
    return next((i.id for i in reversed(completed) if i.action not in DETACHED_ACTIONS), None)


def _lane(
    timeline: Timeline, writes: list[Instant], pending: list[Instant], lanes: Lanes
) -> tuple[int, int]:
    """The lane of a write beginning beside ``pending`` (its live writers' lanes), after
    the completed data ``writes``: the lanes of those completed within the expiry that this
    writer has not looked at yet count as seen at their time (a writer between two writes
    has no pending instant; the documents are kept, and the conflict checks read them
    too)."""
    live: dict[int, str] = {}
    for p in pending:
        if p.action in DETACHED_ACTIONS:
            continue
        plan = timeline.plan(p)
        found = lane_of({**plan, **extra_of(plan)})
        if found is not None:
            live[found[0]] = found[1]
    by_id = {i.id: i for i in writes}
    now, clock = dt.datetime.now(dt.UTC), time.monotonic()
    for instant_id in lanes.to_look_at(list(by_id)):
        age = seconds_since(instant_id, now)
        if age > lanes.expiry_seconds:
            continue
        try:
            doc = timeline.raw(by_id[instant_id])
        except (TableCorruptedError, FileNotFoundError):  # lanes only steer: the conflict
            continue  # checks read it again, and say what is wrong with it
        if (found := lane_of(extra_of(doc))) is not None:
            lanes.saw(*found, now=clock - max(age, 0.0))
    return lanes.choose(live)
