"""How often a write runs again, per cause: each cause of a retry has a budget of its own.

A Spark write runs again when an assigner actor restarted in the middle of it (with a new
fleet, twice at most). Causes that are unrelated must not share one attempt counter (one
would use up the other's attempts, or end the loop with no attempt left for the last), so
each cause counts only its own retries, whatever the order they come in.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from dynbucket.base.errors import CommitFailedError, ConcurrentWriteError
from dynbucket.format.table.options import TableOptions
from dynbucket.write.results import WriteResult

log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryPolicy:
    """Runs an attempt until it succeeds, retrying each cause up to its budget.

    Args:
        budgets: exception class -> retries it may cause (an error of no listed class, or
            of a class whose budget is spent, propagates).
    """

    def __init__(self, budgets: Mapping[type[BaseException], int]) -> None:
        if any(n < 0 for n in budgets.values()):
            raise ValueError(f"retry budgets must be >= 0, got {dict(budgets)}")
        self.budgets = dict(budgets)
        self.retried = 0
        """Retries of the cause being retried, this one included (read in ``before_retry``)."""
        self.conflicts = 0
        """Attempts that conflicted with another writer's commit (written again)."""
        self.lost = 0.0
        """Seconds the conflicting attempts took, the wait before each next one included."""

    def run(self, attempt: Callable[[], T], before_retry: Callable[[BaseException], None]) -> T:
        """``attempt()`` until it returns; ``before_retry(error)`` runs before each retry."""
        left = dict(self.budgets)
        while True:
            began = time.perf_counter()
            try:
                return attempt()
            except tuple(left) as e:
                cause = next(c for c in left if isinstance(e, c))
                if left[cause] == 0:
                    raise
                left[cause] -= 1
                self.retried = self.budgets[cause] - left[cause]
                before_retry(e)
                if isinstance(e, ConcurrentWriteError):
                    self.conflicts += 1
                    self.lost += time.perf_counter() - began

    def told(self, result: WriteResult) -> WriteResult:
        """``result`` saying how often the write ran again after a conflict, and the
        seconds the attempts that ran again took (``WriteResult.seconds['again']``)."""
        if not self.conflicts:
            return result
        seconds = {**result.seconds, "again": round(self.lost, 4)}
        return dataclasses.replace(result, written_again=self.conflicts, seconds=seconds)

    def with_conflicts(self, options: TableOptions) -> RetryPolicy:
        """A fresh policy of this one's budgets (its counters are one write's), and with
        several writers a budget for commits that conflicted with another writer's
        (``concurrency.conflict-retries``)."""
        if not options.optimistic:
            return RetryPolicy(self.budgets)
        return RetryPolicy({**self.budgets, ConcurrentWriteError: options.conflict_retries})


def after_conflict(error: BaseException, retried: int = 1) -> bool:
    """Before a write runs again: whether ``error`` was a conflict with another writer;
    then it waits a random moment, longer after each of its conflicts (up to 2 s), so that
    writers that keep meeting spread out and a slow one gets its turn."""
    if not isinstance(error, ConcurrentWriteError):
        return False
    log.info("writing again after a conflict with another writer: %s", error)
    time.sleep(random.uniform(0.0, min(2.0, 0.05 * 2**retried)))
    return True


def files_gone(operation: str, error: FileNotFoundError) -> CommitFailedError:
    """The error of a write whose read file went missing on every attempt (a service
    beside it cleaned it each time)."""
    return CommitFailedError(
        f"{operation}: a file it read went missing on every attempt ({error}); nothing "
        "was written. Write again; if it fails the same way, run `dynbucket check`"
    )
