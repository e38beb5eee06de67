"""A write's retries: each cause has its own budget, whatever order the causes come in; a
spent budget raises the cause itself. The Spark writer retries a restarted assigner twice,
with a new fleet each time."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import AssignerRestartedError, WriteConflictError
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.results import WriteResult
from dynbucket.write.spark import SparkWriter
from dynbucket.write.writer import RetryPolicy


class _Layout(Exception):
    """A second, unrelated cause with a budget of one."""


CAUSES = {
    "layout": _Layout("a group spans tasks"),
    "restart": AssignerRestartedError("slot 1 restarted"),
}
POLICY = {_Layout: 1, AssignerRestartedError: 2}
#: Every order of one retry of the first cause and two of the second.
ORDERS = sorted(set(itertools.permutations(["layout", "restart", "restart"])))


def _run(script: list[str]) -> tuple[str, list[str]]:
    """Runs a scripted attempt under ``POLICY``; returns its result and the causes retried."""
    left = list(script)
    retried: list[str] = []

    def attempt() -> str:
        if left:
            raise CAUSES[left.pop(0)]
        return "written"

    def before_retry(error: BaseException) -> None:
        retried.append(next(k for k, v in CAUSES.items() if v is error))

    return RetryPolicy(POLICY).run(attempt, before_retry), retried


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_every_order_of_causes_gets_its_retries(order: tuple[str, ...]) -> None:
    assert _run(list(order)) == ("written", list(order))


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (["restart", "restart", "restart"], AssignerRestartedError),
        (["restart", "layout", "restart", "restart"], AssignerRestartedError),
        (["layout", "layout"], _Layout),
    ],
)
def test_a_spent_budget_raises_its_cause(script: list[str], error: type[Exception]) -> None:
    with pytest.raises(error):
        _run(script)


def test_errors_of_no_budget_are_not_retried() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ValueError("not a retry cause")

    with pytest.raises(ValueError):
        RetryPolicy({_Layout: 1}).run(attempt, lambda e: None)
    assert calls == [1]
    with pytest.raises(ValueError, match=">= 0"):
        RetryPolicy({_Layout: -1})


class _Scripted(SparkWriter):
    """A SparkWriter whose attempts fail as scripted (no Spark, no actors)."""

    def __init__(self, restarts: int, conflicts: int = 0, mode: str = "SINGLE_WRITER") -> None:
        options = TableOptions(write_concurrency_mode=mode, conflict_retries=2)
        spec = TableSpec(pa.schema([("id", pa.string())]), ("id",), options=options)
        super().__init__(None, spec, None, default_slots=1)  # type: ignore[arg-type]
        self.restarts = restarts
        self.conflicts = conflicts
        self.attempts = 0
        self.closed = 0

    def _write(
        self,
        df: Any,
        operation: str,
        slots: Any,
        stream: Any,
        file_stream: bool,
        partial: bool,
        laps: Any = None,
    ) -> Any:
        self.attempts += 1
        if self.restarts:
            self.restarts -= 1
            raise AssignerRestartedError("slot 1 restarted")
        if self.conflicts:
            self.conflicts -= 1
            raise WriteConflictError("another writer inserted k1")
        return WriteResult(instant="1", operation="upsert", rows_written=1)

    def close(self) -> None:
        self.closed += 1


def test_the_spark_writer_retries_a_restarted_assigner_twice_with_a_new_fleet() -> None:
    writer = _Scripted(2)
    done = writer.write(None, "upsert")  # type: ignore[arg-type]
    assert (done.instant, done.written_again) == ("1", 0)  # restarts are no conflicts
    assert (writer.attempts, writer.closed) == (3, 2)
    with pytest.raises(AssignerRestartedError):
        _Scripted(3).write(None, "upsert")  # type: ignore[arg-type]


def test_a_conflicting_commit_is_written_again_only_with_several_writers() -> None:
    writer = _Scripted(0, conflicts=2, mode="OPTIMISTIC_CONCURRENCY_CONTROL")
    done = writer.write(None, "upsert")  # type: ignore[arg-type]
    assert done.written_again == 2 and done.seconds["again"] > 0
    assert (writer.attempts, writer.closed) == (3, 0)  # the fleet is kept
    with pytest.raises(WriteConflictError):  # the budget: concurrency.conflict-retries
        writer = _Scripted(0, conflicts=3, mode="OPTIMISTIC_CONCURRENCY_CONTROL")
        writer.write(None, "upsert")  # type: ignore[arg-type]
    single = _Scripted(0, conflicts=1)
    with pytest.raises(WriteConflictError):
        single.write(None, "upsert")  # type: ignore[arg-type]
    assert single.attempts == 1


def test_each_write_counts_its_retries_on_a_policy_of_its_own() -> None:
    """A writer's class-wide budgets give each write a fresh policy: one write's retries
    are not counted in the next one's (``written_again``), alone or beside other writers."""
    restarts = [1]

    def attempt() -> str:
        if restarts[0]:
            restarts[0] -= 1
            raise AssignerRestartedError("slot 0 restarted")
        return "done"

    for mode in ("SINGLE_WRITER", "OPTIMISTIC_CONCURRENCY_CONTROL"):
        policy = SparkWriter.retries.with_conflicts(TableOptions(write_concurrency_mode=mode))
        assert policy is not SparkWriter.retries
        restarts[0] = 1
        assert policy.run(attempt, lambda e: None) == "done" and policy.retried == 1
        assert SparkWriter.retries.retried == 0
