"""Table-level options, persisted with the table: its Hudi type, its meta fields, and the
settings of its services and writers.

Options named ``hoodie.*`` are Hudi's own and live in ``.hoodie/hoodie.properties``; the
others are dynbucket's and live under ``.hoodie/.dynbucket/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynbucket.base.errors import ConfigError
from dynbucket.base.options import PersistedOptions, option

MERGE_ON_READ, COPY_ON_WRITE = "MERGE_ON_READ", "COPY_ON_WRITE"
TABLE_TYPES = (MERGE_ON_READ, COPY_ON_WRITE)
HUDI_PREFIX = "hoodie."


@dataclass(frozen=True)
class TableOptions(PersistedOptions):
    """Options of a table, its services and writers."""

    table_type: str = option("hoodie.table.type", MERGE_ON_READ)
    """``MERGE_ON_READ`` (updates and deletes go to log files, merged on read; compaction
    folds them into base files) or ``COPY_ON_WRITE`` (a write rewrites the base files of the
    file groups it touches, so readers of base files alone see every row)."""
    populate_meta_fields: bool = option("hoodie.populate.meta.fields", True)
    """Whether records carry Hudi's five ``_hoodie_*`` meta fields. Without them files are
    smaller, but readers lose per-record commit times (incremental queries) and Hudi readers
    that merge log records by ``_hoodie_record_key`` read merge-on-read tables unmerged."""
    cleaner_commits_retained: int = option("cleaner.commits-retained", 10)
    """Completed instants whose file slices stay readable; older slices go at the next clean,
    and reads as of older instants fail clearly."""
    index_compaction_min_files: int = option("index.compaction.min-files", 8)
    """Index delta files of a partition that trigger index compaction."""
    lock_lease_seconds: float = option("lock.lease-seconds", 60.0)
    """How long a dead writer can hold the table."""

    def __post_init__(self) -> None:
        if self.table_type not in TABLE_TYPES:
            raise ConfigError(
                f"{self.key('table_type')}={self.table_type!r}: must be one of {TABLE_TYPES}"
            )
        if not isinstance(self.populate_meta_fields, bool):
            raise ConfigError(
                f"{self.key('populate_meta_fields')}={self.populate_meta_fields!r}: must be "
                "True or False"
            )
        for name in (
            "cleaner_commits_retained",
            "index_compaction_min_files",
            "lock_lease_seconds",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{self.key(name)}={value!r}: must be a number > 0")

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    def hudi_properties(self) -> dict[str, str]:
        """The options Hudi defines, as ``hoodie.properties`` spells them."""
        return {k: v for k, v in self.to_properties().items() if k.startswith(HUDI_PREFIX)}

    def own_properties(self) -> dict[str, str]:
        """dynbucket's own options."""
        return {k: v for k, v in self.to_properties().items() if not k.startswith(HUDI_PREFIX)}
