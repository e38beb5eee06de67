"""A write's retries: each cause (a file group spanning slots, an assigner restarted) has its
own budget, whatever order the causes come in; a spent budget raises the cause itself."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from dynbucket.base.errors import AssignerRestartedError, SlotLayoutError
from dynbucket.write.retry import RetryPolicy
from dynbucket.write.spark import SparkWriter

CAUSES = {"layout": SlotLayoutError("a group spans slots"),
          "restart": AssignerRestartedError("slot 1 restarted")}  # fmt: skip
#: Every order of one layout fallback and two actor restarts (the most of each a write takes).
ORDERS = sorted(set(itertools.permutations(["layout", "restart", "restart"])))


class _Scripted(SparkWriter):
    """A SparkWriter whose attempts fail as scripted (no Spark, no actors)."""

    def __init__(self, script: list[str]) -> None:
        super().__init__(None, None, None, default_slots=1)  # type: ignore[arg-type]
        self.script = list(script)
        self.attempts: list[bool] = []  # each attempt's ``fused``
        self.closed = 0

    def _write(
        self, df: Any, operation: str, slots: Any, stream: Any, fused: bool, file_stream: bool
    ) -> Any:
        self.attempts.append(fused)
        if self.script:
            raise CAUSES[self.script.pop(0)]
        return "written"

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_every_order_of_causes_gets_its_retries(order: tuple[str, ...]) -> None:
    writer = _Scripted(list(order))
    assert writer.write(None, "upsert") == "written"  # type: ignore[arg-type]
    assert len(writer.attempts) == 4 and writer.closed == 2
    # Fused until the layout fallback, unfused from then on.
    at = order.index("layout") + 1
    assert writer.attempts == [True] * at + [False] * (4 - at)


@pytest.mark.parametrize(("script", "error"), [
    (["restart", "restart", "restart"], AssignerRestartedError),
    (["restart", "layout", "restart", "restart"], AssignerRestartedError),
    (["layout", "layout"], SlotLayoutError),
])  # fmt: skip
def test_a_spent_budget_raises_its_cause(script: list[str], error: type[Exception]) -> None:
    with pytest.raises(error):
        _Scripted(script).write(None, "upsert")  # type: ignore[arg-type]


def test_errors_of_no_budget_are_not_retried() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ValueError("not a retry cause")

    with pytest.raises(ValueError):
        RetryPolicy({SlotLayoutError: 1}).run(attempt, lambda e: None)
    assert calls == [1]
    with pytest.raises(ValueError, match=">= 0"):
        RetryPolicy({SlotLayoutError: -1})
