"""The timeline's actions, described once: every list of actions a caller needs (Hudi's,
dynbucket's own, those run beside the writes, those that rewrite file slices) is derived
from this table, so a new action is one row here and its service's module.

An :class:`Action` is a ``str`` (``Action.COMMIT == "commit"``): instants read from storage
carry the plain text, and compare equal to the members.
"""

from __future__ import annotations

from enum import StrEnum

from dynbucket.format.hudi.instant_files import HUDI_ACTIONS


class Action(StrEnum):
    """An instant's action, as the timeline spells it (``Instant.action``)."""

    COMMIT = "commit"
    """A data write (Hudi's ``commit``, or ``deltacommit`` on a merge-on-read table)."""
    COMPACTION = "compaction"
    """A file slice's logs folded into a new base file (Hudi's)."""
    LOG_COMPACTION = "logcompaction"
    """A file slice's logs merged into one log (Hudi's)."""
    INDEX_COMPACTION = "index-compaction"
    """dynbucket's index deltas of a partition merged."""
    METADATA_COMPACTION = "metadata-compaction"
    """The compaction of Hudi's metadata table, run by dynbucket (version 9 tables)."""
    CLEAN = "clean"
    """Files no retained instant reads, removed."""
    ROLLBACK = "rollback"
    """Dead writers' instants rolled back."""

    @property
    def hudi(self) -> bool:
        """Hudi's own action: its instant files are Hudi's (``format/hudi/instant_files``);
        the others are dynbucket's records under ``.hoodie/.dynbucket/``."""
        return self in _HUDI

    @property
    def detached(self) -> bool:
        """Scheduled under the writer lease, then executed and completed without it, beside
        the writes: a writer never rolls it back; the next run executes it again."""
        return self in _DETACHED

    @property
    def on_commits_timeline(self) -> bool:
        """Completed, it is on Hudi's commits timeline (a ``commit`` or ``deltacommit``
        file): where a reader of a version 6 table sees the active timeline start."""
        return self in _COMMITS

    @property
    def rewrites_slices(self) -> bool:
        """It rewrites file slices (one such instant at a time per file group)."""
        return self in _SLICE_REWRITES


_HUDI = frozenset(Action(a) for a in HUDI_ACTIONS)
_DETACHED = frozenset(
    {
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.INDEX_COMPACTION,
        Action.METADATA_COMPACTION,
        Action.CLEAN,
    }
)
_SLICE_REWRITES = frozenset({Action.COMPACTION, Action.LOG_COMPACTION})
_COMMITS = frozenset({Action.COMMIT, Action.COMPACTION, Action.LOG_COMPACTION})

#: Every action, in the table's order.
ACTIONS: tuple[Action, ...] = tuple(Action)
#: Instants recorded by dynbucket alone (beside Hudi's).
OWN_ACTIONS: tuple[Action, ...] = tuple(a for a in Action if not a.hudi)
#: Services scheduled under the lease and executed and completed without it, beside the
#: writes: never settled (rolled back) by a writer; the next run executes them again.
DETACHED_ACTIONS: tuple[Action, ...] = tuple(a for a in Action if a.detached)
#: The actions that rewrite file slices (one at a time per file group).
COMPACTIONS: tuple[Action, ...] = tuple(a for a in Action if a.rewrites_slices)
