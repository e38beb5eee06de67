"""What a write returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class WriteResult:
    """One committed instant of a write.

    ``keys_updated`` counts keys the table already knew (including keys deleted earlier and
    written again); ``keys_deleted`` counts delete markers written for known keys, and
    ``keys_not_found`` deletes of keys the table never had.
    """

    instant: str
    operation: str
    rows_written: int
    keys_inserted: int = 0
    keys_updated: int = 0
    keys_deleted: int = 0
    keys_not_found: int = 0
    buckets_created: int = 0
    files_written: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per stage (prepare, assign, write, index, commit, total)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
