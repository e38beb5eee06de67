"""What a table service did."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceResult:
    """What a table service did (``instant`` is None when there was nothing to do)."""

    action: str
    instant: str | None
    files_written: int = 0
    files_removed: int = 0
    rows: int = 0
