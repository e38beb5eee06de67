"""Several writer processes on one table at once, against a model of what they acknowledged.

Three processes (``tests/writers.py``) write change batches of keys they all share into one
table with ``hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL``, services on,
while this test SIGSTOPs them (shorter and longer than their heartbeat's expiry) and
SIGKILLs one at a random point (``tests/writers.py``'s ``run_model``). Every op has an
ordering value no other op has, yet no single order is the model: writers commit in an
order nobody records, and a delete then an older upsert brings a key back (as Hudi's
writers do) where the other order leaves it deleted. So each key's row must be one that
some order of the committed ops gives, each writer's own ops in its order (an op that was
issued and not acknowledged may or may not have committed); an acknowledged op is always
among them. After all: no writer but the
killed one failed, one row per key, each key's row one the model allows (no acknowledged
op lost), no bucket over capacity, ``check`` healthy and hudi-rs reading the same. The
table is of version 6 or 9 (Hudi's metadata table kept in step by every writer), by the
seed.

``DYNBUCKET_WRITERS_RUNS`` runs more seeds (the suite runs one, new each run;
``make test-long`` 20).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hudi_readers import check_hudi_reads
from tests.seeds import seeds
from tests.writers import run_model

RUNS = int(os.environ.get("DYNBUCKET_WRITERS_RUNS", "1"))


@pytest.mark.parametrize("seed", seeds(RUNS))
def test_several_writers_match_the_model(tmp_path: Path, seed: int) -> None:
    table = run_model(str(tmp_path / "t"), seed, tmp_path)
    try:
        check_hudi_reads(table, time_travel=False)
    except AssertionError as e:  # rare: the message says what a rerun may not show again
        instants = [(i.id, i.action, i.state.name) for i in table.snapshot().timeline.instants()]
        data = (f for f in (tmp_path / "t").rglob("*.*") if ".hoodie" not in f.parts)
        files = sorted(str(f.relative_to(tmp_path / "t")) for f in data)
        raise AssertionError(f"{e}\ninstants: {instants}\nfiles: {files}") from e
    finally:
        table.close()
