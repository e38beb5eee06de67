"""An instant's heartbeat: how writers beside each other tell a live instant from a dead one.

With several writers (``hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL``) no
writer holds the table while it writes, so a pending instant is not a dead writer's just
because another writer sees it. Each write instant has a heartbeat file, Hudi's
``.hoodie/.heartbeat/<instant>`` (Hudi's writers keep the same one), holding the time it
expires; its writer renews it every quarter of ``heartbeat.expiry-seconds``. An instant
whose heartbeat is missing or expired is a dead writer's: the next writer to begin settles
it (``settle.settle``: rolled back, unless its writer had decided it committed).

A detached service's instant (a compaction, an index compaction, a clean) beats one too
while a process executes it (:func:`beating`): a writer that finds it pending executes it
only when nobody beats it (its executor died), not a second time beside a live executor.

A writer never renews a heartbeat that expired in its own view (it was paused: a GC pause,
SIGSTOP, a suspended VM), so it cannot revive an instant another writer may be rolling back.
Its commit is refused once another writer decided the instant rolled back (the exclusive
outcome, ``outcome.py``, is the commit point); one that nobody settled while it stalled
commits (``Transaction._verify_not_settled``): a writer that settles it after that finds it
committed, and publishes it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR

HEARTBEAT_DIR = f"{HOODIE_DIR}/.heartbeat"

log = logging.getLogger(__name__)


def heartbeat_path(store: TableStore, instant: str) -> str:
    return store.path(HEARTBEAT_DIR, instant)


def expires_at(store: TableStore, instant: str) -> float | None:
    """When the instant's heartbeat expires (None: it has none, or it cannot be read)."""
    path = heartbeat_path(store, instant)
    try:
        data = store.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        return float(json.loads(data)["expires_at"])
    except (ValueError, KeyError, TypeError):
        return None


def is_alive(store: TableStore, instant: str, now: float | None = None) -> bool:
    """Whether the instant's writer beat within its expiry (a pending instant that is not
    alive was left by a dead or stalled writer)."""
    expiry = expires_at(store, instant)
    return expiry is not None and expiry > (time.time() if now is None else now)


def forget(store: TableStore, instant: str) -> None:
    """Removes a settled or finished instant's heartbeat file."""
    store.delete(heartbeat_path(store, instant))


class Heartbeat:
    """The heartbeat of one instant: ``start()`` writes it and renews it from a thread until
    ``stop()``, which removes it."""

    def __init__(self, store: TableStore, instant: str, expiry_seconds: float) -> None:
        if expiry_seconds <= 0:
            raise ValueError(f"expiry_seconds={expiry_seconds}: must be > 0")
        self.store = store
        self.instant = instant
        self.expiry_seconds = expiry_seconds
        self._expires_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._beat_once()
        self._thread = threading.Thread(
            target=self._beat, name=f"dynbucket-heartbeat-{self.instant}", daemon=True
        )
        self._thread.start()

    def lapsed(self) -> bool:
        """Whether the heartbeat expired in this writer's own view (another writer may
        have settled the instant)."""
        return time.time() >= self._expires_at

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        forget(self.store, self.instant)

    def _beat_once(self) -> None:
        expires = time.time() + self.expiry_seconds
        body = json.dumps({"expires_at": expires}).encode()
        self.store.write_atomic(heartbeat_path(self.store, self.instant), body, durable=False)
        self._expires_at = expires

    def _beat(self) -> None:
        while not self._stop.wait(self.expiry_seconds / 4):
            if time.time() >= self._expires_at:
                return  # expired in our own view: never revive it
            try:
                self._beat_once()
            except OSError:
                continue  # the next beat retries; verify() reports a lapse


def executor_beat(store: TableStore, instant: str, expiry_seconds: float) -> Heartbeat | None:
    """The heartbeat of a detached service's executor, started: other writers leave the
    instant to it (``plans.unattended``). One the store refuses to write (a flaky network)
    is no reason not to execute the service: None then, and another writer may execute
    it too (the outcome completes it once)."""
    beat = Heartbeat(store, instant, expiry_seconds)
    try:
        beat.start()
    except OSError as e:
        log.warning("%s: its executor's heartbeat was not written (%s); running it", instant, e)
        return None
    return beat


def end_executor_beat(beat: Heartbeat | None) -> None:
    """Stops an :func:`executor_beat`; a heartbeat file the store fails to remove lapses on
    its own within its expiry."""
    if beat is None:
        return
    try:
        beat.stop()
    except OSError as e:
        log.warning("%s: its executor's heartbeat was not removed (%s)", beat.instant, e)


@contextmanager
def beating(store: TableStore, instant: str, expiry_seconds: float) -> Iterator[None]:
    """An :func:`executor_beat` while the block runs: a detached service's executor beats
    it, so that another writer finding the instant pending does not execute it a second
    time while this one does (``plans.unattended``)."""
    beat = executor_beat(store, instant, expiry_seconds)
    try:
        yield
    finally:
        end_executor_beat(beat)
