"""The crash model in short (``dynbucket bench crash`` runs 100 rounds): one round of each
of two faults a run (the run's seed chooses; ``make test-long`` every fault) on a stream
with the services on, and after each the table whole."""

from __future__ import annotations

import json
import random
from pathlib import Path

from dynbucket.bench import crash
from dynbucket.table import Table
from tests.seeds import sample


def test_the_table_is_whole_after_every_fault(tmp_path: Path) -> None:
    """A writer SIGKILLed, one of its service processes SIGKILLed or SIGSTOPped, the writer
    SIGSTOPped past its lease while another process writes: after each, nothing pending
    since the last check, bounded timeline and files, the rows of the model (by dynbucket
    and hudi-rs), ``check`` healthy, and no service process left behind."""
    path = str(tmp_path / "table")
    Table.create(path, crash.SCHEMA, "id", "day", "v", options=crash.OPTIONS).close()
    model, first, carried = crash.Model(), 0, set[str]()
    # Two of the four faults a run, in their order, chosen by the run's seed (every one with
    # DYNBUCKET_SAMPLE=all: make test-long).
    faults = sample("the crash model's faults", crash.FAULTS, 2)
    for r, fault in enumerate(faults):
        rng = random.Random(r)
        report, model, first, carried = crash.run_round(path, r, rng, model, first, carried, fault)
        assert report["ok"], json.dumps(report)
        assert report["batches_committed"] > 0
        if fault.endswith("service"):
            assert report["service_processes"] > 0, report  # a service process was hit


def test_a_batch_is_the_same_in_every_process() -> None:
    op, rows = crash.batch(3)
    assert op == "delete" and rows.num_rows == 20
    assert crash.batch(5)[1].equals(crash.batch(5)[1])
    model = crash.Model()
    model.apply(0)
    assert len(model.rows) == crash.ROWS
    model.apply_rows("delete", crash.batch(0)[1].slice(0, 10))
    assert len(model.rows) == crash.ROWS - 10
