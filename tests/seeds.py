"""The seed of this run's sampled sequences: it changes per run, so that coverage adds up
over runs instead of being cut, and every run prints it (the session's header, and each
test's id holds its own seed). ``DYNBUCKET_SEED=N`` repeats a run's choices; the counts of
each sequence are the suite's (``make test``) unless ``make test-long`` raises them."""

from __future__ import annotations

import os
import time

BASE = int(os.environ.get("DYNBUCKET_SEED", time.time_ns() // 1000 % 1_000_000))


def seeds(count: int, offset: int = 0) -> list[int]:
    """``count`` seeds of this run (``offset`` keeps two families of one test apart)."""
    return [BASE + offset * 1_000_003 + i for i in range(count)]
