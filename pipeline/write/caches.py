"""When may a writer's assigner caches be trusted: one rule for every writer.

An assigner's caches (one in-process core, or a fleet of slot actors) hold the buckets of
the keys as of the last data write the writer committed. With several writers, whose
instants complete out of id order, "the last data write" is the whole set of completed
data writes (``Transaction.caches_match``), and caches that missed another writer's
keys placed beside a commit match nothing. A write may use them as they are
only when the latest completed data write (``commit`` action) is that one; when another
writer (or another handle of the table) wrote in between, the caches catch up
(``BucketAssigner.catch_up``: each cached partition reads only the index deltas it has not
seen, the keys they insert and delete and every slot's counts; the processes stay), and a
partition whose missed deltas an index compaction restated loads again at its next touch.
Table services, whoever runs them (compaction, also beside the
writes; cleaning; index compaction; archival, which takes the oldest data writes off the
set; rollback of what was never committed), move no key, so they never break a match.
"""

from __future__ import annotations

from dynbucket.format.timeline.transaction import caches_hold

#: What caches that miss another writer's keys match: no instant.
_NOTHING = "caches missing another writer's keys"


class CacheMatch:
    """The data write a writer's caches match (None: the empty table)."""

    def __init__(self) -> None:
        self.instant: str | None = None

    def holds(self, last_write: str | None) -> bool:
        """Whether a write whose latest completed data write is ``last_write`` may use the
        caches as they are."""
        return caches_hold(self.instant, last_write)

    def emptied(self, last_write: str | None) -> None:
        """The caches were emptied (empty caches match any committed state) or caught up
        with the table as of ``last_write``."""
        self.instant = last_write

    def committed(self, match: str | None) -> None:
        """This writer committed an instant (its caches took its mappings); ``match``: what
        they match now (``Transaction.caches_match``: the instant; with several writers the
        set of data writes, None when they miss keys another writer placed beside it)."""
        self.instant = _NOTHING if match is None else match
