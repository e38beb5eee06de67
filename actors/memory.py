"""Memory a slot's process gives back after a bootstrap.

A bootstrap reads index files (Arrow buffers) and merges sorted parts (numpy arrays of a
few megabytes each, which glibc serves from its heap once its mmap threshold has grown
past them); freed, both stay resident unless handed back, and a slot's resident size per
key is what a cluster pays for. So after a bootstrap the slot hands back what is free.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import pyarrow as pa


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def release_unused_memory() -> None:
    """Hands free memory back to the system: Arrow's pool, and the C heap's free pages
    (glibc's ``malloc_trim``; elsewhere a no-op)."""
    pa.default_memory_pool().release_unused()
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is not None:
        trim(0)
