"""When may a writer's assigner caches be trusted: one rule for every writer.

An assigner's caches (one in-process core, or a fleet of slot actors) hold the buckets of
the keys as of the last instant the writer committed. A write may use them as they are only
when it builds on that instant; when another writer (or another handle of the table)
committed in between, the caches are emptied (``reset``: the processes stay) and every
partition bootstraps again from the record-level index at its next touch. A table service
of this process (compaction, cleaning, index compaction) moves no key, so a match carries
across its instant.
"""

from __future__ import annotations


class CacheMatch:
    """The committed instant a writer's caches match (None: the empty table)."""

    def __init__(self) -> None:
        self.instant: str | None = None

    def holds(self, based_on: str | None) -> bool:
        """Whether a write built on ``based_on`` may use the caches as they are."""
        return based_on == self.instant

    def emptied(self, based_on: str | None) -> None:
        """The caches were emptied: empty caches match any committed state."""
        self.instant = based_on

    def committed(self, instant: str) -> None:
        """This writer committed ``instant`` (its caches took its mappings)."""
        self.instant = instant

    def carry(self, before: str | None, service: str) -> None:
        """A service of this process committed ``service`` on top of ``before``."""
        if self.instant == before:
            self.instant = service
