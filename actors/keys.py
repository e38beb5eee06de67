"""Key hashes as the assigner sees them: routing to slots, and cache keys.

A record key's 64-bit hash is Spark's ``xxhash64`` of the key fields (a signed long); the
same value is computed in Python by ``dynbucket.base.keyhash``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dynbucket.base.keyhash import slot_of

_SIGN = np.uint64(1 << 63)

__all__ = ["slot_of", "to_cache_keys"]


def to_cache_keys(hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Maps signed hashes to uint64 preserving order (flip the sign bit).

    An RLI column sorted by signed hash is then a sorted cache run with no re-sort.
    """
    return np.ascontiguousarray(hashes).view(np.uint64) ^ _SIGN
