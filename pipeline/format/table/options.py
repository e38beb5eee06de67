"""Table-level options, persisted with the table: its Hudi type, its meta fields, and the
settings of its services and writers.

Hudi's table properties (``hoodie.table.type``, ``hoodie.populate.meta.fields``) live in
``.hoodie/hoodie.properties``; every other option lives under ``.hoodie/.dynbucket/``. The
table services' options carry the names of Hudi's write options where Hudi has one
(``hoodie.compact.inline.max.delta.commits``, ``hoodie.keep.min.commits``, ...): they mean
the same, although Hudi passes them to each writer instead of keeping them with the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynbucket.base.errors import ConfigError
from dynbucket.base.options import PersistedOptions, option

MERGE_ON_READ, COPY_ON_WRITE = "MERGE_ON_READ", "COPY_ON_WRITE"
TABLE_TYPES = (MERGE_ON_READ, COPY_ON_WRITE)
SINGLE_WRITER, OPTIMISTIC = "SINGLE_WRITER", "OPTIMISTIC_CONCURRENCY_CONTROL"
CONCURRENCY_MODES = (SINGLE_WRITER, OPTIMISTIC)
#: The options that are Hudi table properties (in ``hoodie.properties``).
HUDI_TABLE_PROPERTIES = ("hoodie.table.type", "hoodie.populate.meta.fields", "hoodie.table.version")
#: Hudi table versions a table is created in (an adopted table keeps its own: 6, 8 or 9).
CREATED_VERSIONS = (6, 9)


@dataclass(frozen=True)
class TableOptions(PersistedOptions):
    """Options of a table, its services and writers."""

    table_type: str = option("hoodie.table.type", MERGE_ON_READ)
    """``MERGE_ON_READ`` (updates and deletes go to log files, merged on read; compaction
    folds them into base files) or ``COPY_ON_WRITE`` (a write rewrites the base files of the
    file groups it touches, so readers of base files alone see every row)."""
    table_version: int = option("hoodie.table.version", 6)
    """The Hudi table version a new table is written in: 6 (read by Hudi 0.14 on and every
    reader that reads Hudi; the index in dynbucket's own files) or 9 (Hudi 1.1's: timeline
    layout 2, and Hudi's metadata table, whose ``files`` partition lists the table's files
    for Hudi's readers). An adopted table keeps its own (6, 8 or 9)."""
    populate_meta_fields: bool = option("hoodie.populate.meta.fields", True)
    """Whether records carry Hudi's five ``_hoodie_*`` meta fields. Without them files are
    smaller, but readers lose per-record commit times (incremental queries) and Hudi readers
    that merge log records by ``_hoodie_record_key`` read merge-on-read tables unmerged."""
    cleaner_commits_retained: int = option("cleaner.commits-retained", 10)
    """Completed instants whose file slices stay readable; older slices go at the next clean,
    and reads as of older instants fail clearly."""
    index_compaction_min_files: int = option("index.compaction.min-files", 8)
    """Index delta files of a partition that trigger index compaction."""
    index_compaction_delta_ratio: float = option("index.compaction.delta-size-ratio", 0.2)
    """Bytes of a partition's index deltas, as a fraction of its index base's, from which
    an automatic index compaction rewrites the partition's whole index (below: it merges a
    run of the newest deltas into one)."""
    lock_lease_seconds: float = option("lock.lease-seconds", 60.0)
    """How long a dead writer can hold the table (``SINGLE_WRITER``)."""
    write_concurrency_mode: str = option("hoodie.write.concurrency.mode", OPTIMISTIC)
    """``OPTIMISTIC_CONCURRENCY_CONTROL`` (the default): writers write beside each other (in
    other processes, drivers or machines); each takes the table only for a moment to begin
    and to commit, and a commit is checked against the instants that completed since its
    write began (docs/design.md, "Several writers"): one that conflicts is written again.
    ``SINGLE_WRITER``: one writer holds the table for a whole write, a second one is
    refused. A table keeps the mode it was created with (one created before this option
    existed: ``SINGLE_WRITER``)."""
    commit_lease_seconds: float = option("lock.commit-lease-seconds", 5.0)
    """``OPTIMISTIC_CONCURRENCY_CONTROL``: the lease a writer holds while it begins or commits
    an instant: how long a writer killed in that moment delays the others."""
    lock_wait_seconds: float = option("lock.wait-seconds", 120.0)
    """``OPTIMISTIC_CONCURRENCY_CONTROL``: how long a writer waits for another's commit lease
    before it fails with ``ConcurrentWriteError``."""
    heartbeat_expiry_seconds: float = option("heartbeat.expiry-seconds", 60.0)
    """``OPTIMISTIC_CONCURRENCY_CONTROL``: a write instant whose heartbeat
    (``.hoodie/.heartbeat/<instant>``, renewed four times per expiry) is this old is a
    dead writer's, rolled back by the next writer that begins."""
    conflict_retries: int = option("concurrency.conflict-retries", 10)
    """``OPTIMISTIC_CONCURRENCY_CONTROL``: how often a write whose commit conflicts with
    another writer's is written again before ``WriteConflictError`` reaches the caller."""
    compaction_delta_commits: int = option("hoodie.compact.inline.max.delta.commits", 5)
    """Log files a file slice takes before it is compacted (merge-on-read tables)."""
    compaction_target_io_mb: int = option("hoodie.compaction.target.io", 128)
    """Megabytes of file slices one automatic compaction reads at most, the slices with the
    most log files first (at least one slice): a compaction of a large table runs as several
    short ones, so none holds the timeline's archival back for long (``Table.compact``
    compacts every slice)."""
    log_compaction_enable: bool = option("hoodie.log.compaction.enable", True)
    """Whether the automatic services merge a slice's logs into one log (Hudi's log
    compaction, which reads the logs only) rather than compacting it into a new base file,
    until its logs reach ``compaction.log-size-ratio`` of its base. On by default here (off
    in Hudi's writers): it keeps a stream's compaction work per write flat as groups grow."""
    compaction_log_size_ratio: float = option("compaction.log-size-ratio", 0.2)
    """Bytes of a slice's logs, as a fraction of its base file's, from which the automatic
    services compact it into a new base (below: its logs are merged into one). Smaller:
    reads merge fewer log records, and base files are rewritten more often."""
    compaction_inline: bool = option("hoodie.compact.inline", False)
    """Whether a due compaction runs inside the write that made it due (the write waits)."""
    compaction_async: bool = option("hoodie.datasource.compaction.async.enable", True)
    """Whether due compactions (of file slices, and of the index) and cleans run beside the
    writes (a Ray task with a Runtime, else a thread or a service process); a write never
    waits for them. Without this and ``compaction_inline``, file slices are compacted only by
    ``Table.compact``, and the index and cleans run inline."""
    clean_automatic: bool = option("hoodie.clean.automatic", True)
    """Whether writes clean file slices no retained instant reads."""
    clean_max_commits: int = option("hoodie.clean.max.commits", 5)
    """Data commits after the last clean that make the next one due (a clean lists every
    partition, so it runs every few commits, not after each)."""
    archive_automatic: bool = option("hoodie.archive.automatic", True)
    """Whether writes archive old instants off the active timeline."""
    keep_min_commits: int = option("hoodie.keep.min.commits", 20)
    """Instants the active timeline keeps when it is archived."""
    keep_max_commits: int = option("hoodie.keep.max.commits", 30)
    """Instants on the active timeline that make an archival due."""
    index_compaction_automatic: bool = option("index.compaction.automatic", True)
    """Whether writes compact a partition's index once it has ``index.compaction.min-files``
    files."""
    metadata_compaction_automatic: bool = option("metadata.compaction.automatic", True)
    """Whether writes compact Hudi's metadata table (tables of version 8 and 9) beside
    them: a file group rewritten as a base file once its logs are due, as an instant of its
    own (Hudi runs its metadata compaction inside a write). Off: a write rewrites a group
    itself once it holds 40 logs."""
    evolve_on_write: bool = option("schema.evolve-on-write", True)
    """Whether a write's records may evolve the table's schema as Hudi's writers do on
    write: a new nullable field, a promoted type (int to long, float to double, ...). Off:
    such records are refused (Hudi has no switch: its writers always evolve)."""
    null_for_missing_columns: bool = option("hoodie.write.set.null.for.missing.columns", False)
    """Whether an upsert's records may lack fields of the table (not its key, partition or
    ordering fields): the missing fields are written as nulls. Off: such records are
    refused, naming the fields (``upsert(..., partial=True)`` keeps the table's values of
    them instead)."""
    allow_empty_commit: bool = option("hoodie.allow.empty.commit", False)
    """Whether a write that writes nothing (an empty input, a delete of keys the table does
    not have) still commits an instant. Off (unlike Hudi's default, which keeps one to
    carry a source's offsets; a stream's micro-batches here need none): nothing is
    committed, and the result says so."""
    delete_field: str | None = option("hoodie.payload.delete.field", None)
    """A field of the incoming records that marks a record as a delete of its key when it
    holds ``delete_marker`` (a change stream's own operation column: Debezium's ``op``,
    whose ``d`` is a delete). Stored as a column only if the table's schema has it.
    ``_hoodie_is_deleted`` (boolean) marks deletes whatever this says."""
    delete_marker: str | None = option("hoodie.payload.delete.marker", None)
    """The value of ``delete_field`` that marks a delete (compared as text)."""

    def __post_init__(self) -> None:
        if self.table_type not in TABLE_TYPES:
            raise ConfigError(
                f"{self.key('table_type')}={self.table_type!r}: must be one of {TABLE_TYPES}"
            )
        for name in (
            "populate_meta_fields",
            "log_compaction_enable",
            "compaction_inline",
            "compaction_async",
            "clean_automatic",
            "archive_automatic",
            "index_compaction_automatic",
            "metadata_compaction_automatic",
            "null_for_missing_columns",
            "evolve_on_write",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"{self.key(name)}={getattr(self, name)!r}: must be True or False"
                )
        if self.table_version not in (6, 8, 9):
            raise ConfigError(
                f"{self.key('table_version')}={self.table_version!r}: must be one of "
                f"{CREATED_VERSIONS} (8: only a table Hudi 1.0 wrote, adopted)"
            )
        if self.write_concurrency_mode not in CONCURRENCY_MODES:
            raise ConfigError(
                f"{self.key('write_concurrency_mode')}={self.write_concurrency_mode!r}: must "
                f"be one of {CONCURRENCY_MODES}"
            )
        for name in (
            "commit_lease_seconds",
            "lock_wait_seconds",
            "heartbeat_expiry_seconds",
            "conflict_retries",
            "cleaner_commits_retained",
            "index_compaction_min_files",
            "index_compaction_delta_ratio",
            "lock_lease_seconds",
            "compaction_delta_commits",
            "compaction_target_io_mb",
            "compaction_log_size_ratio",
            "clean_max_commits",
            "keep_min_commits",
            "keep_max_commits",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{self.key(name)}={value!r}: must be a number > 0")

        if (self.delete_field is None) != (self.delete_marker is None):
            raise ConfigError(
                f"{self.key('delete_field')}={self.delete_field!r} and "
                f"{self.key('delete_marker')}={self.delete_marker!r}: give both (the field "
                "and the value of it that marks a delete) or neither"
            )
        if self.keep_max_commits <= self.keep_min_commits:
            raise ConfigError(
                f"{self.key('keep_max_commits')}={self.keep_max_commits} must be larger than "
                f"{self.key('keep_min_commits')}={self.keep_min_commits}: raise it"
            )
        if self.keep_min_commits <= self.cleaner_commits_retained:
            raise ConfigError(
                f"{self.key('keep_min_commits')}={self.keep_min_commits} must be larger than "
                f"{self.key('cleaner_commits_retained')}={self.cleaner_commits_retained} (an "
                "instant the cleaner retains stays on the active timeline): raise it"
            )

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def optimistic(self) -> bool:
        """Whether several writers may write at once (``write_concurrency_mode``)."""
        return self.write_concurrency_mode == OPTIMISTIC

    def lease(self) -> tuple[float, float]:
        """(lease seconds, seconds to wait for a live lease) of this table's writer lock:
        a whole write's lease, refused at once when held (``SINGLE_WRITER``), or a moment's,
        waited for (``OPTIMISTIC_CONCURRENCY_CONTROL``)."""
        if self.optimistic:
            return self.commit_lease_seconds, self.lock_wait_seconds
        return self.lock_lease_seconds, 0.0

    def hudi_properties(self) -> dict[str, str]:
        """The options that are Hudi table properties, as ``hoodie.properties`` spells them."""
        return {k: v for k, v in self.to_properties().items() if k in HUDI_TABLE_PROPERTIES}

    def own_properties(self) -> dict[str, str]:
        """The other options (kept under ``.hoodie/.dynbucket/``)."""
        return {k: v for k, v in self.to_properties().items() if k not in HUDI_TABLE_PROPERTIES}
