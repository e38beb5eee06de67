"""Routing rows to slots: Spark task ``i`` receives exactly the rows of slot ``i``.

``repartition(N, col)`` sends a row to task ``pmod(murmur3(col), N)``, not to task ``col``.
For each slot we pick a small int whose Spark hash lands in that slot's task, and route on it;
so the slot actor ``i`` is called by one task, with every row of its slot.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash(int)`` (Murmur3_x86_32.hashInt), as a signed int."""
    k1 = (value & _M32) * 0xCC9E2D51 & _M32
    k1 = _rotl32(k1, 15) * 0x1B873593 & _M32
    h1 = (seed & _M32) ^ k1
    h1 = (_rotl32(h1, 13) * 5 + 0xE6546B64) & _M32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _M32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


@lru_cache(maxsize=64)
def route_values(num_slots: int) -> tuple[int, ...]:
    """For each slot ``i``, the smallest int ``v`` with ``pmod(hash(v), N) == i``."""
    found: dict[int, int] = {}
    v = 0
    while len(found) < num_slots:
        found.setdefault(spark_hash_int(v) % num_slots, v)
        v += 1
    return tuple(found[i] for i in range(num_slots))


def route_column(hash_column: str, num_slots: int) -> Column:
    """An int column that makes ``repartition(num_slots, it)`` put slot ``i`` in task ``i``."""
    from pyspark.sql import functions as F

    values = F.array(*[F.lit(v) for v in route_values(num_slots)])
    slot = F.pmod(F.col(hash_column), F.lit(num_slots)).cast("int")
    return F.element_at(values, slot + 1)
