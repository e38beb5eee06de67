"""When may a writer's assigner caches be trusted: one rule for every writer.

An assigner's caches (one in-process core, or a fleet of slot actors) hold the buckets of
the keys as of the last data write the writer committed. A write may use them as they are
only when the latest completed data write (``commit`` action) is that one; when another
writer (or another handle of the table) wrote in between, the caches are emptied
(``reset``: the processes stay) and every partition bootstraps again from the record-level
index at its next touch. Table services, whoever runs them (compaction, also beside the
writes; cleaning; index compaction; archival; rollback of what was never committed), move
no key, so they never break a match.
"""

from __future__ import annotations


class CacheMatch:
    """The data write a writer's caches match (None: the empty table)."""

    def __init__(self) -> None:
        self.instant: str | None = None

    def holds(self, last_write: str | None) -> bool:
        """Whether a write whose latest completed data write is ``last_write`` may use the
        caches as they are."""
        return last_write == self.instant

    def emptied(self, last_write: str | None) -> None:
        """The caches were emptied: empty caches match any committed state."""
        self.instant = last_write

    def committed(self, instant: str) -> None:
        """This writer committed ``instant`` (its caches took its mappings)."""
        self.instant = instant
