"""How often a write runs again, per cause: each cause of a retry has a budget of its own.

A Spark write runs again when an assigner actor restarted in the middle of it (with a new
fleet, twice at most). Causes that are unrelated must not share one attempt counter (one
would use up the other's attempts, or end the loop with no attempt left for the last), so
each cause counts only its own retries, whatever the order they come in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from dynbucket.base.errors import CommitFailedError

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

    def run(self, attempt: Callable[[], T], before_retry: Callable[[BaseException], None]) -> T:
        """``attempt()`` until it returns; ``before_retry(error)`` runs before each retry."""
        left = dict(self.budgets)
        while True:
            try:
                return attempt()
            except tuple(left) as e:
                cause = next(c for c in left if isinstance(e, c))
                if left[cause] == 0:
                    raise
                left[cause] -= 1
                before_retry(e)


def files_gone(operation: str, error: FileNotFoundError) -> CommitFailedError:
    """The error of a write whose read file went missing on every attempt (a service
    beside it cleaned it each time)."""
    return CommitFailedError(
        f"{operation}: a file it read went missing on every attempt ({error}); nothing "
        "was written. Write again; if it fails the same way, run `dynbucket check`"
    )
