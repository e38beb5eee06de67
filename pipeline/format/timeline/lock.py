"""One writer per table (I9): a numbered lease under ``.hoodie/.dynbucket/``, renewed by a
heartbeat.

Leases are files ``writer.lease.<generation>``; the one with the highest generation is the
table's lease, and it is live until it expires or its writer marks it released. Taking the
table is creating the next generation, exclusively and with its content in one step, so
that of writers racing for a free table or for an expired lease exactly one wins, and no
reader ever sees a lease file without its content:

1. Read the newest lease. A live one refuses the writer (:class:`ConcurrentWriteError`
   naming the holder). An unreadable one (damaged, or written by a store without atomic
   creation) counts as a dead writer's: it expires ``lease_seconds`` after its file time.
2. Create generation + 1 exclusively. A writer that loses the race looks again (and finds
   the winner's live lease); one that finds a newer generation than its own (it read a
   stale listing) removes its file and looks again.
3. Remove the older generations.

With several writers (``OPTIMISTIC_CONCURRENCY_CONTROL``) the lease is short
(``lock.commit-lease-seconds``) and held only to begin or to commit an instant; a writer
that finds it live waits for it (``wait_seconds``) instead of failing. A lease names the
instant its holder is committing: a writer that takes over an expired one settles that
instant first (``superseded``), so a holder paused between its checks and its commit point
finds its instant decided rolled back, never commits past the checks of the next one. Until
a taker settled them, the instants owed a settle are written into every lease after
(``Lease.settling``): a taker that settles nothing (an archival) or stalls before it settles
passes them on, and a lease released or taken over later still names them. (Before, the
next taker saw only the lease it took over: a paused write whose lease an archival took and
released committed past a compaction that had completed without its log.)

The lease is fair: a writer that finds it live queues a ticket
``writer.wait.<since>.<owner>`` (kept fresh while it waits), and a writer takes a free
lease only if no live ticket is older than its own, so the writer waiting longest gets it
next. A ticket is live while its file time is within a lease (plus a second for stores
that keep file times to the second): a waiter killed or paused delays the others no more.

A holder rewrites only its own file (renewals, the release mark) and holds the table while
its file is the newest and, in its own view, unexpired: it never renews a lease that
expired in its own view, so it cannot overwrite a successor's, and it finds out at its next
``verify()`` (before any commit). Generations only grow, so a lease is never taken twice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import re
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace

import pyarrow.fs as pafs

from dynbucket.base.errors import ConcurrentWriteError, StorageError
from dynbucket.format.storage.store import TEMPORARY, TableStore
from dynbucket.format.table.paths import META_DIR

DEFAULT_LEASE_SECONDS = 60.0
LEASE_PREFIX = "writer.lease."
TICKET_PREFIX = "writer.wait."
_LEASE = re.compile(r"^writer\.lease\.(\d{20})$")
_TICKET = re.compile(r"^writer\.wait\.(\d{20})\.([0-9a-f]+)$")
_MTIME_GRAIN = 1.0
"""Seconds of a store's file-time resolution (S3 keeps whole seconds) added to a ticket's
life, so a fresh ticket never looks expired."""
_TRIES = 10
#: A waiter's first and longest pause between looks at the lease: a commit holds it for
#: 10-20 ms here, and a fixed 20-100 ms pause left it free most of a waiter's wait (two
#: writers, no services: 0.067 s a write asleep, 0.77x one writer's rows/s; from 4 ms,
#: growing by half each look: 0.004-0.025 s, 0.99-1.02x). A long wait, on a store where a
#: look costs a request, looks seldom again; on a local disk a look is a folder listing,
#: and a pause grown to 100 ms left the lease free while the oldest waiter, whose turn it
#: was, slept (four writers: 0.08-0.15 s a write waiting for the commit lease, against
#: 0.03-0.08 s with pauses of at most 20 ms, and 7.2-8.9 s against 6.3-7.2 s for their
#: 48 writes).
_PAUSE_FIRST = 0.004
_PAUSE_MAX = 0.1
_PAUSE_MAX_LOCAL = 0.02


@dataclass(frozen=True)
class Lease:
    owner: str
    host: str
    pid: int
    expires_at: float
    released: bool = False
    instant: str | None = None
    """The instant the holder is committing (several writers: settled on a takeover)."""
    settling: tuple[str, ...] = ()
    """Instants of holders this lease's line took over, not yet settled (module doc)."""

    def describe(self) -> str:
        left = self.expires_at - time.time()
        return f"writer {self.owner} (host {self.host}, pid {self.pid}), lease {left:.0f}s left"


@dataclass(frozen=True)
class _Found:
    """The newest lease file: its generation, and its lease (None when unreadable)."""

    generation: int
    path: str
    lease: Lease | None
    mtime: float


@dataclass(frozen=True)
class _Ticket:
    """A waiting writer's place in the queue for the lease (module doc)."""

    since: int
    """When it began to wait (nanoseconds since the epoch, its own clock)."""
    owner: str
    path: str
    written: float
    """When this process last wrote it (monotonic; 0.0: not yet, or another writer's)."""

    @property
    def order(self) -> tuple[int, str]:
        return self.since, self.owner


class WriterLock:
    """The table's writer lease; use ``with lock:`` around a write."""

    def __init__(
        self,
        store: TableStore,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        wait_seconds: float = 0.0,
    ) -> None:
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds={lease_seconds}: must be > 0")
        self.store = store
        self.wait_seconds = wait_seconds
        self.instant: str | None = None
        self.superseded: tuple[str, ...] = ()
        """The instants this holder must settle before it acts: the one an expired lease it
        took over was committing, and those its line still owed (module doc)."""
        self.dir = store.path(META_DIR)
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex[:12]
        self.generation: int | None = None
        self.waited = 0.0
        """Seconds spent waiting for another holder to release (every acquire summed)."""
        self._held = False
        self._expires_at = 0.0
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def path(self, generation: int) -> str:
        return f"{self.dir}/{LEASE_PREFIX}{generation:020d}"

    @classmethod
    def for_table(cls, store: TableStore, lease: tuple[float, float]) -> WriterLock:
        """The lock of a table whose options say ``lease`` (``TableOptions.lease()``)."""
        return cls(store, lease[0], lease[1])

    @property
    def held(self) -> bool:
        """Whether this holder took the lease and has not released it."""
        return self._held

    def acquire(self, instant: str | None = None) -> None:
        """Takes the table, or raises :class:`ConcurrentWriteError` naming the holder (after
        waiting up to ``wait_seconds`` for it, in turn: module doc). ``instant``: the one
        this holder commits."""
        if self._held:
            return
        self.instant = instant
        self.superseded = ()
        deadline = time.monotonic() + self.wait_seconds
        tries = 0
        waiting: float | None = None
        ticket: _Ticket | None = None
        pause = _PAUSE_FIRST
        local = self.store.is_local
        try:
            while tries < _TRIES:
                # 1.
                newest, tickets = self._scan()
                try:
                    if newest is not None:
                        self._refuse_if_live(newest)
                    self._refuse_if_others_wait_longer(tickets, ticket)
                except ConcurrentWriteError:
                    now = time.monotonic()
                    if now >= deadline:
                        raise
                    waiting = now if waiting is None else waiting
                    ticket = self._queue(ticket)
                    time.sleep(random.uniform(0.5, 1.0) * pause)
                    pause = min(pause * 1.5, _PAUSE_MAX_LOCAL if local else _PAUSE_MAX)
                    continue
                if waiting is not None:
                    self.waited += time.monotonic() - waiting
                    waiting = None
                tries += 1
                generation = newest.generation + 1 if newest is not None else 1
                # 2.
                self.superseded = _owed(newest.lease if newest is not None else None)
                lease = self._new_lease()
                # Not flushed: a lease lost in a power cut only frees the table of a dead
                # writer.
                if not self.store.create_exclusive(
                    self.path(generation), _encode(lease), durable=False
                ):
                    continue
                latest = self._newest()
                if latest is None or latest.generation != generation:
                    self.store.delete(self.path(generation))
                    continue
                # 3.
                self.generation = generation
                self._remove_older(generation)
                self._took(lease)
                return
        finally:
            if ticket is not None:
                # A ticket left behind (the store failed) lapses within a lease on its own.
                with contextlib.suppress(OSError, StorageError):
                    self.store.delete(ticket.path)
        raise ConcurrentWriteError(
            f"could not take the writer lease of {self.store.uri} in {_TRIES} tries: other "
            "writers keep taking it; dynbucket allows one writer per table"
        )

    def holder(self) -> str | None:
        """Who holds the table now (None: nobody), without taking or changing anything."""
        newest = self._newest()
        if newest is None:
            return None
        try:
            self._refuse_if_live(newest)
        except ConcurrentWriteError as e:
            return str(e)
        return None

    def verify(self) -> None:
        """Raises :class:`ConcurrentWriteError` unless this writer still holds the lease."""
        newest = self._newest()
        if not self._held or newest is None or not self._mine(newest):
            holder = "nobody"
            if newest is not None and newest.lease is not None:
                holder = newest.lease.describe()
            raise ConcurrentWriteError(
                f"writer {self.owner} lost the lease of {self.store.uri} (now held by {holder}); "
                "its changes are not committed"
            )
        if time.time() >= self._expires_at:
            raise ConcurrentWriteError(
                f"writer {self.owner}'s lease of {self.store.uri} expired (heartbeat stalled "
                f"over {self.lease_seconds:.0f}s); its changes are not committed"
            )

    def settled(self, instants: tuple[str, ...]) -> None:
        """``instants`` of ``superseded`` are settled: the lease stops naming them (written
        at once, so that a taker after this holder does not settle them again)."""
        left = tuple(i for i in self.superseded if i not in instants)
        if left == self.superseded:
            return
        self.superseded = left
        self.verify()
        assert self.generation is not None
        lease = self._new_lease()
        self.store.write_atomic(self.path(self.generation), _encode(lease))
        self._expires_at = lease.expires_at

    def release(self) -> None:
        """Marks the lease released (the next writer takes the table at once)."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._held and self.generation is not None:
            newest = self._newest()
            if newest is not None and self._mine(newest) and newest.lease is not None:
                released = replace(newest.lease, released=True, settling=self.superseded)
                self.store.write_atomic(
                    self.path(self.generation), _encode(released), durable=False
                )
        self._held = False

    # --- internals -----------------------------------------------------------------------

    def _new_lease(self) -> Lease:
        return Lease(
            self.owner,
            socket.gethostname(),
            os.getpid(),
            time.time() + self.lease_seconds,
            instant=self.instant,
            settling=self.superseded,
        )

    def _mine(self, found: _Found) -> bool:
        return (
            found.generation == self.generation
            and found.lease is not None
            and found.lease.owner == self.owner
            and not found.lease.released
        )

    def _refuse_if_live(self, found: _Found) -> None:
        now = time.time()
        if found.lease is None:
            expires = found.mtime + self.lease_seconds
            if expires > now:
                at = dt.datetime.fromtimestamp(expires, dt.UTC).strftime("%H:%M:%S UTC")
                raise ConcurrentWriteError(
                    f"the writer lease {found.path} of {self.store.uri} is unreadable (a "
                    "writer died while creating it, or the file was damaged); it counts as a "
                    f"dead writer's lease and expires at {at} (in {expires - now:.0f}s, "
                    "lock.lease-seconds after the file was written): write again then"
                )
        elif not found.lease.released and found.lease.expires_at > now:
            raise ConcurrentWriteError(
                f"table {self.store.uri} is being written by {found.lease.describe()}; "
                "dynbucket allows one writer per table: wait for it to finish (a dead "
                "writer's lease expires on its own)"
            )

    def _newest(self) -> _Found | None:
        """The lease file with the highest generation (None: the table never had a writer)."""
        return self._scan()[0]

    def _scan(self) -> tuple[_Found | None, list[_Ticket]]:
        """The newest lease file, and the live tickets of waiting writers (one listing)."""
        for _ in range(_TRIES):
            listing = self.store.list_files(self.dir)
            files = {
                int(m.group(1)): info for info in listing if (m := _LEASE.match(info.base_name))
            }
            tickets = self._live_tickets(listing)
            if not files:
                return None, tickets
            generation = max(files)
            info = files[generation]
            try:
                data = self.store.read_bytes(info.path)
            except FileNotFoundError:
                continue  # a newer writer removed it in between: list again
            mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
            return _Found(generation, info.path, _decode(data), mtime), tickets
        return None, []

    def _live_tickets(self, listing: list[pafs.FileInfo]) -> list[_Ticket]:
        horizon = time.time() - self.lease_seconds - _MTIME_GRAIN
        out = []
        for info in listing:
            m = _TICKET.match(info.base_name)
            if m is None or info.mtime is None:
                continue
            if info.mtime.timestamp() >= horizon:
                out.append(_Ticket(int(m.group(1)), m.group(2), info.path, 0.0))
        return out

    def _refuse_if_others_wait_longer(self, tickets: list[_Ticket], mine: _Ticket | None) -> None:
        """A free lease is for the writer waiting longest: refuses while a live ticket of
        another writer is older than ``mine`` (than any, when this writer has none)."""
        ahead = [
            t for t in tickets if t.owner != self.owner and (mine is None or t.order < mine.order)
        ]
        if ahead:
            raise ConcurrentWriteError(
                f"{len(ahead)} other writer(s) of {self.store.uri} have waited longer for "
                "the commit lease; this writer takes it in turn"
            )

    def _queue(self, ticket: _Ticket | None) -> _Ticket:
        """This writer's ticket in the queue for the lease: created on the first wait,
        rewritten (its file time renewed) every third of a lease while it waits."""
        if ticket is None:
            since = time.time_ns()
            path = f"{self.dir}/{TICKET_PREFIX}{since:020d}.{self.owner}"
            ticket = _Ticket(since, self.owner, path, 0.0)
        if time.monotonic() - ticket.written >= self.lease_seconds / 3:
            self.store.write_atomic(ticket.path, b"", durable=False)
            ticket = replace(ticket, written=time.monotonic())
        return ticket

    def _remove_older(self, generation: int) -> None:
        """Older lease files, temporary files a killed writer left while creating or
        renewing one, and tickets of waiters gone (older than a lease: no live writer is
        still writing them)."""
        horizon = time.time() - self.lease_seconds
        for info in self.store.list_files(self.dir):
            m = _LEASE.match(info.base_name)
            older = m is not None and int(m.group(1)) < generation
            stray = (
                TEMPORARY.match(info.base_name) is not None
                and info.base_name.startswith(f".{LEASE_PREFIX}")
                and info.mtime is not None
                and info.mtime.timestamp() < horizon
            )
            dead_ticket = (
                _TICKET.match(info.base_name) is not None
                and info.mtime is not None
                and info.mtime.timestamp() < horizon - _MTIME_GRAIN
            )
            if older or stray or dead_ticket:
                self.store.delete(info.path)

    def _took(self, lease: Lease) -> None:
        self._held = True
        self._expires_at = lease.expires_at
        self._stop.clear()
        self._heartbeat = threading.Thread(
            target=self._beat, name=f"dynbucket-lease-{self.owner}", daemon=True
        )
        self._heartbeat.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            if time.time() >= self._expires_at:
                return  # expired in our own view: a successor may own the table now
            lease = self._new_lease()
            try:
                newest = self._newest()
                if newest is None or not self._mine(newest) or self.generation is None:
                    return
                self.store.write_atomic(self.path(self.generation), _encode(lease), durable=False)
            except OSError:
                continue  # the store failed: a later beat retries; verify() reports a lapse
            self._expires_at = lease.expires_at


def _owed(before: Lease | None) -> tuple[str, ...]:
    """The instants a writer taking the lease after ``before`` must settle: those ``before``
    still owed, and the one it was committing unless it released the lease."""
    if before is None:
        return ()
    owed = list(before.settling)
    if not before.released and before.instant and before.instant not in owed:
        owed.append(before.instant)
    return tuple(owed)


def _encode(lease: Lease) -> bytes:
    return json.dumps(asdict(lease)).encode()


def _decode(data: bytes) -> Lease | None:
    try:
        fields = json.loads(data)
        return Lease(**{**fields, "settling": tuple(fields.get("settling") or ())})
    except (ValueError, TypeError, AttributeError):
        return None
