"""Hudi's names of timeline files (timeline layout 1: ``.hoodie/<id>.<suffix>``).

An instant is requested, then inflight, then completed (Hudi's ``HoodieInstant.State``);
each state is one file whose suffix says the action and the state:

* merge-on-read writes: ``deltacommit.requested``, ``deltacommit.inflight``, ``deltacommit``;
* copy-on-write writes: ``commit.requested``, ``inflight``, ``commit``;
* compactions: ``compaction.requested``, ``compaction.inflight``, then ``commit``;
* log compactions: ``logcompaction.requested``, ``logcompaction.inflight``, then
  ``deltacommit`` (merge-on-read tables only).

A completed compaction is spelled as a commit, a completed log compaction as a delta
commit: a reader tells them from writes by the requested file the instant started with.
"""

from __future__ import annotations

import enum


class HudiAction(enum.StrEnum):
    """Actions as Hudi's timeline files spell them, whoever wrote them (dynbucket's own
    names of its actions: ``timeline/actions.py``)."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"


#: The actions dynbucket writes on Hudi's timeline (a data write is ``commit``).
HUDI_ACTIONS = (HudiAction.COMMIT, HudiAction.COMPACTION, HudiAction.LOG_COMPACTION)


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


_WRITES_MOR = {
    State.REQUESTED: "deltacommit.requested",
    State.INFLIGHT: "deltacommit.inflight",
    State.COMPLETED: "deltacommit",
}
_WRITES_COW = {
    State.REQUESTED: "commit.requested",
    State.INFLIGHT: "inflight",
    State.COMPLETED: "commit",
}
_COMPACTIONS = {
    State.REQUESTED: "compaction.requested",
    State.INFLIGHT: "compaction.inflight",
    State.COMPLETED: "commit",
}
_LOG_COMPACTIONS = {
    State.REQUESTED: "logcompaction.requested",
    State.INFLIGHT: "logcompaction.inflight",
    State.COMPLETED: "deltacommit",
}
#: Actions whose completed file is spelled as a write's: told apart by their requested file.
SPELLED_AS_WRITES = ("compaction", "logcompaction")
_SUFFIXES = {
    "deltacommit.requested": ("commit", State.REQUESTED),
    "deltacommit.inflight": ("commit", State.INFLIGHT),
    "deltacommit": ("commit", State.COMPLETED),
    "commit.requested": ("commit", State.REQUESTED),
    "inflight": ("commit", State.INFLIGHT),
    "commit": ("commit", State.COMPLETED),
    "compaction.requested": ("compaction", State.REQUESTED),
    "compaction.inflight": ("compaction", State.INFLIGHT),
    "logcompaction.requested": ("logcompaction", State.REQUESTED),
    "logcompaction.inflight": ("logcompaction", State.INFLIGHT),
}


def suffix(action: str, state: State, merge_on_read: bool) -> str:
    """The suffix of the timeline file of an instant of ``action`` in ``state``."""
    if action == "compaction":
        return _COMPACTIONS[state]
    if action == "logcompaction":
        return _LOG_COMPACTIONS[state]
    return (_WRITES_MOR if merge_on_read else _WRITES_COW)[state]


def parse_suffix(text: str) -> tuple[str, State] | None:
    """(action, state) of a timeline file's suffix (None: not a file of these actions)."""
    return _SUFFIXES.get(text)
