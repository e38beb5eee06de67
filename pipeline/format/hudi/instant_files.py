"""Hudi's names of timeline files (timeline layout 1: ``.hoodie/<id>.<suffix>``).

An instant is requested, then inflight, then completed (Hudi's ``HoodieInstant.State``);
each state is one file whose suffix says the action and the state:

* merge-on-read writes: ``deltacommit.requested``, ``deltacommit.inflight``, ``deltacommit``;
* copy-on-write writes: ``commit.requested``, ``inflight``, ``commit``;
* compactions: ``compaction.requested``, ``compaction.inflight``, then ``commit``.

A completed compaction is spelled as a commit: a reader tells the two apart by the
requested file the instant started with.
"""

from __future__ import annotations

import enum

#: The actions dynbucket writes on Hudi's timeline (a data write is ``commit``).
HUDI_ACTIONS = ("commit", "compaction")


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


_WRITES_MOR = {State.REQUESTED: "deltacommit.requested", State.INFLIGHT: "deltacommit.inflight",
               State.COMPLETED: "deltacommit"}  # fmt: skip
_WRITES_COW = {State.REQUESTED: "commit.requested", State.INFLIGHT: "inflight",
               State.COMPLETED: "commit"}  # fmt: skip
_COMPACTIONS = {State.REQUESTED: "compaction.requested", State.INFLIGHT: "compaction.inflight",
                State.COMPLETED: "commit"}  # fmt: skip
_SUFFIXES = {
    "deltacommit.requested": ("commit", State.REQUESTED),
    "deltacommit.inflight": ("commit", State.INFLIGHT),
    "deltacommit": ("commit", State.COMPLETED),
    "commit.requested": ("commit", State.REQUESTED),
    "inflight": ("commit", State.INFLIGHT),
    "commit": ("commit", State.COMPLETED),
    "compaction.requested": ("compaction", State.REQUESTED),
    "compaction.inflight": ("compaction", State.INFLIGHT),
}


def suffix(action: str, state: State, merge_on_read: bool) -> str:
    """The suffix of the timeline file of an instant of ``action`` in ``state``."""
    if action == "compaction":
        return _COMPACTIONS[state]
    return (_WRITES_MOR if merge_on_read else _WRITES_COW)[state]


def parse_suffix(text: str) -> tuple[str, State] | None:
    """(action, state) of a timeline file's suffix (None: not a file of these actions)."""
    return _SUFFIXES.get(text)
