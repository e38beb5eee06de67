"""Which completed data writes a slot's caches reflect, as a token a write compares.

A writer's assigner caches hold the keys of the data writes they saw; a write may use them
only while the table holds no key they miss (``write/writer.py``). With one writer, the
token is the latest completed data write; with several, whose instants complete out of id
order, it is the set of completed data writes and of those pending at the cached write's
begin (``Transaction.caches_match`` makes one, ``writes_token`` another at each begin).
"""

from __future__ import annotations

from collections.abc import Sequence

from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Instant


def writes_token(
    completed: list[Instant], optimistic: bool, pending_writes: Sequence[str]
) -> str | None:
    """What assigner caches must match for a write to use them (``write/writer.py``): the
    latest completed data write with one writer; with several (whose instants complete out
    of id order), the whole set of completed data writes, and the pending ones."""
    writes = [i.id for i in completed if i.action == Action.COMMIT]
    if not optimistic:
        return writes[-1] if writes else None
    return token(writes, pending_writes) if writes else None


_WRITES = "writes:"
_PENDING = ";pending:"


def token(ids: list[str], pending: Sequence[str] = ()) -> str:
    """The set of data writes ``ids`` (and those ``pending``) as a token: the ids
    themselves (the active timeline's, so a few dozen), which ``caches_hold`` compares."""
    return _WRITES + ",".join(sorted(ids)) + _PENDING + ",".join(sorted(pending))


def _parse(text: str) -> tuple[set[str], list[str], set[str]]:
    """A token's data writes (as a set, and sorted) and its pending data writes."""
    writes, _, pending = text[len(_WRITES) :].partition(_PENDING)
    listed = writes.split(",")
    return set(listed), listed, set(filter(None, pending.split(",")))


def caches_hold(cached: str | None, now: str | None) -> bool:
    """Whether caches that match ``cached`` (``caches_match``) match a write whose
    ``writes_token`` is ``now``: the same, or, with several writers, the same set of data
    writes less its oldest, which archival moved off the active timeline since (archival
    moves no key; it takes the oldest instants only, so a data write the caches do not
    reflect is among those left), with every write pending then pending still. A write
    pending when the cached one began has an older id: completed after it, it is archived
    with the oldest and is on neither list (the writers model, seed 945312: a Spark write
    pending for 4 s completed, was archived at once, and a writer whose caches missed its
    key placed it a second time)."""
    if cached == now:
        return True
    if not (cached and now and cached.startswith(_WRITES) and now.startswith(_WRITES)):
        return False
    had, _, waited = _parse(cached)
    have_set, have, pending = _parse(now)
    return (
        had.issuperset(have_set)
        and all(i < have[0] for i in had.difference(have_set))
        and waited.issubset(pending)
    )
