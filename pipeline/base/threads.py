"""Thread pools kept for the life of the process.

A pool made per call starts its threads per call: measured on a small in-process write,
starting threads took about a seventh of its time (more while a compaction ran beside
it). These pools are made once per process and name: tasks of one pool must never wait
for tasks of the same pool (a pool whose every thread waits deadlocks), so each use that
nests gets a name of its own. A forked child inherits a pool without its threads: it gets
a new one.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOLS: dict[tuple[str, int], tuple[int, ThreadPoolExecutor]] = {}
_LOCK = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` of ``workers`` threads (made at the first call)."""
    key = (name, max(1, workers))
    with _LOCK:
        found = _POOLS.get(key)
        if found is None or found[0] != os.getpid():
            pool = ThreadPoolExecutor(key[1], thread_name_prefix=f"dynbucket-{name}")
            found = _POOLS[key] = (os.getpid(), pool)
        return found[1]
