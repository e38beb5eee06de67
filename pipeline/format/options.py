"""Table-level options (cleaning, index compaction, the writer lease), persisted with the table."""

from __future__ import annotations

from dataclasses import dataclass

from dynbucket.actors.errors import ConfigError
from dynbucket.actors.options import PersistedOptions, option


@dataclass(frozen=True)
class TableOptions(PersistedOptions):
    """Options of a table's services and writers."""

    cleaner_commits_retained: int = option("cleaner.commits-retained", 10)
    """Completed instants whose file slices stay readable; older slices go at the next clean,
    and reads as of older instants fail clearly."""
    index_compaction_min_files: int = option("index.compaction.min-files", 8)
    """Index delta files of a partition that trigger index compaction."""
    lock_lease_seconds: float = option("lock.lease-seconds", 60.0)
    """How long a dead writer can hold the table."""

    def __post_init__(self) -> None:
        for f in self.persisted_fields():
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{self.key(f.name)}={value!r}: must be a number > 0")
