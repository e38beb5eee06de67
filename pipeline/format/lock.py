"""One writer per table (I9): a lease file under ``.hoodie/.dynbucket/``, renewed by a heartbeat.

A second writer finds a live lease and gets :class:`ConcurrentWriteError` at once. A writer
that died leaves a lease that expires after ``lease_seconds``; the next writer breaks it
(rename to a unique name, which only one breaker wins) and takes the table. A holder whose
lease expired in its own view never renews it, so it cannot overwrite a successor's lease;
it finds out at its next ``verify()`` (before any commit).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from dynbucket.actors.errors import ConcurrentWriteError
from dynbucket.pipeline.format.paths import LOCK_FILE
from dynbucket.pipeline.format.storage import TableStore

DEFAULT_LEASE_SECONDS = 60.0


@dataclass(frozen=True)
class Lease:
    owner: str
    host: str
    pid: int
    expires_at: float

    def describe(self) -> str:
        left = self.expires_at - time.time()
        return f"writer {self.owner} (host {self.host}, pid {self.pid}), lease {left:.0f}s left"


class WriterLock:
    """The table's writer lease; use ``with lock:`` around a write."""

    def __init__(self, store: TableStore, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds={lease_seconds}: must be > 0")
        self.store = store
        self.path = store.path(LOCK_FILE)
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex[:12]
        self._held = False
        self._expires_at = 0.0
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Takes the table, or raises :class:`ConcurrentWriteError` naming the holder."""
        if self._held:
            return
        for _ in range(5):
            lease = self._new_lease()
            if self.store.create_exclusive(self.path, _encode(lease)):
                self._took(lease)
                return
            current = self._read()
            if current is None:
                continue  # released or broken in between: try again
            if current.expires_at > time.time():
                raise ConcurrentWriteError(
                    f"table {self.store.uri} is being written by {current.describe()}; "
                    "dynbucket allows one writer per table: wait for it to finish (a dead "
                    "writer's lease expires on its own)"
                )
            self._break(current)
        raise ConcurrentWriteError(f"could not take the writer lease of {self.store.uri}")

    def verify(self) -> None:
        """Raises :class:`ConcurrentWriteError` unless this writer still holds the lease."""
        current = self._read()
        if not self._held or current is None or current.owner != self.owner:
            holder = current.describe() if current else "nobody"
            raise ConcurrentWriteError(
                f"writer {self.owner} lost the lease of {self.store.uri} (now held by {holder}); "
                "its changes are not committed"
            )
        if time.time() >= self._expires_at:
            raise ConcurrentWriteError(
                f"writer {self.owner}'s lease of {self.store.uri} expired (heartbeat stalled "
                f"over {self.lease_seconds:.0f}s); its changes are not committed"
            )

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._held:
            current = self._read()
            if current is not None and current.owner == self.owner:
                self.store.delete(self.path)
        self._held = False

    # --- internals -----------------------------------------------------------------------

    def _new_lease(self) -> Lease:
        return Lease(
            self.owner, socket.gethostname(), os.getpid(), time.time() + self.lease_seconds
        )

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
                return  # expired in our own view: a successor may own it now
            current = self._read()
            if current is None or current.owner != self.owner:
                return
            lease = self._new_lease()
            try:
                self.store.write_atomic(self.path, _encode(lease))
            except OSError:
                continue  # a later beat retries; verify() reports a lapse
            self._expires_at = lease.expires_at

    def _read(self) -> Lease | None:
        try:
            return Lease(**json.loads(self.store.read_bytes(self.path)))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def _break(self, expired: Lease) -> None:
        broken = f"{self.path}.broken-{uuid.uuid4().hex[:8]}"
        try:
            self.store.fs.move(self.path, broken)
        except (FileNotFoundError, OSError):
            return  # another writer broke it first
        moved = self.store.read_bytes(broken)
        if json.loads(moved).get("owner") != expired.owner:
            # Another writer broke the expired lease and took the table in between: put
            # its live lease back (unless a third one already took the name).
            self.store.create_exclusive(self.path, moved)
        self.store.delete(broken)


def _encode(lease: Lease) -> bytes:
    return json.dumps(asdict(lease)).encode()
