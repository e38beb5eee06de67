"""The timeline's history, as ``Table.history`` and ``dynbucket show`` report it."""

from __future__ import annotations

from typing import Any

from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline.timeline import Timeline

#: What a write's keys became, as ``history`` reports them.
KEY_COUNTS = ("inserted", "updated", "stale", "deleted", "not_found")


def history(store: TableStore) -> list[dict[str, Any]]:
    """Every instant with its state and, when completed, its metadata summary (for writes,
    what happened to their keys: ``KEY_COUNTS``)."""
    timeline = Timeline(store)
    out = []
    for instant in timeline.instants():
        row: dict[str, Any] = {
            "instant": instant.id,
            "action": instant.action,
            "state": instant.state.name.lower(),
        }
        if instant.completed:
            meta = timeline.metadata(instant)
            row["operation"] = meta.get("operation")
            row["files"] = len(meta.get("files", []))
            stats = meta.get("stats") or {}
            row["keys"] = {k: stats.get(f"keys_{k}", 0) for k in KEY_COUNTS}
        out.append(row)
    return out
