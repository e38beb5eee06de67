"""The timeline's history, as ``Table.history`` and ``dynbucket show`` report it."""

from __future__ import annotations

from typing import Any

from dynbucket.format.hudi.instant_files import HudiAction
from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Timeline

#: What a write's keys became, as ``history`` reports them.
KEY_COUNTS = ("inserted", "updated", "stale", "deleted", "not_found")


def history(store: TableStore, merge_on_read: bool) -> list[dict[str, Any]]:
    """Every instant with its state and, when completed, its metadata summary: the data
    files it wrote (``files``, as ``WriteResult.files_written`` counts them; its index
    files apart) and, for writes, what happened to their keys (``KEY_COUNTS``). Actions
    are Hudi's: a merge-on-read table's writes are ``deltacommit``s."""
    timeline = Timeline(store, merge_on_read)
    out = []
    for instant in timeline.instants():
        action = instant.action
        if action == Action.COMMIT and merge_on_read:
            action = HudiAction.DELTA_COMMIT
        row: dict[str, Any] = {
            "instant": instant.id,
            "action": action,
            "state": instant.state.name.lower(),
        }
        if instant.completed:
            meta = timeline.metadata(instant)
            row["operation"] = meta.get("operation")
            kinds = [f.get("kind") for f in meta.get("files", [])]
            row["files"] = kinds.count("data")
            row["index_files"] = len(kinds) - row["files"]
            stats = meta.get("stats") or {}
            row["keys"] = {k: stats.get(f"keys_{k}", 0) for k in KEY_COUNTS}
        out.append(row)
    return out
