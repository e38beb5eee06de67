"""The seed of this run's sampled sequences: it changes per run, so that coverage adds up
over runs instead of being cut, and every run prints it (the session's header, and each
test's id holds its own seed). ``DYNBUCKET_SEED=N`` repeats a run's choices; the counts of
each sequence are the suite's (``make test``) unless ``make test-long`` raises them."""

from __future__ import annotations

import os
import random
import time
import zlib
from collections.abc import Sequence
from typing import TypeVar

BASE = int(os.environ.get("DYNBUCKET_SEED", time.time_ns() // 1000 % 1_000_000))
EVERY_CASE = os.environ.get("DYNBUCKET_SAMPLE", "") == "all"
"""``make test-long`` runs every case of a sampled family (``sample``)."""

T = TypeVar("T")


def seeds(count: int, offset: int = 0) -> list[int]:
    """``count`` seeds of this run (``offset`` keeps two families of one test apart)."""
    return [BASE + offset * 1_000_003 + i for i in range(count)]


def sample(family: str, cases: Sequence[T], keep: int) -> list[T]:
    """``keep`` of a family's ``cases`` for this run, chosen by the run's seed and the
    family's name (so two families vary apart), in their order; every case with
    ``DYNBUCKET_SAMPLE=all``. Over runs every case is met: coverage adds up."""
    if EVERY_CASE or keep >= len(cases):
        return list(cases)
    rng = random.Random(BASE * 7919 + zlib.crc32(family.encode()))
    chosen = set(rng.sample(range(len(cases)), keep))
    return [c for i, c in enumerate(cases) if i in chosen]
