"""Rollback of what dead writers left, as an instant of its own (Hudi's ``rollback``)."""

from __future__ import annotations

from dynbucket.format.services.clean import execute_clean
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.plans import unattended
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction


def rollback(store: TableStore, spec: TableSpec) -> list[str]:
    """Settles every pending instant a crashed writer left (as an instant of its own, which
    records them): rolls each back, unless its writer had committed it (then it is
    published, and recorded as such); returns the ids rolled back. Then completes the
    cleans whose executor died: a clean's removed files cannot come back, and until it
    completes, a metadata table lists them and Hudi's readers fail on them (the next
    writer's services would complete it; a table nobody writes again waited for that)."""
    txn = Transaction.begin(store, spec, Action.ROLLBACK, "rollback")
    rolled = [i for i, done in txn.settled.items() if done == "rolled back"]
    published = [i for i, done in txn.settled.items() if done == "published"]
    txn.commit({"rolled-back": rolled, "published": published})
    for left in unattended(Timeline(store, spec.options.merge_on_read), Action.CLEAN):
        execute_clean(store, spec, left.id)
    return rolled
