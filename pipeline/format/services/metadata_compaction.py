"""Metadata compaction: the metadata table's file groups rewritten as base files beside
the writes, as an instant of its own (``metadata-compaction``; its steps and rule:
``format/metadata/compaction.py``). Hudi runs its metadata compaction inside a write;
here a write only appends its logs, and no write pays for a group's rewrite."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dynbucket.format.metadata import compaction
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.services.log_compaction import HEAVY
from dynbucket.format.services.service import Scope, Service, ServiceResult, resume
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Instant, Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile
from dynbucket.format.timeline.transaction import schedule as schedule_instant

ACTION = Action.METADATA_COMPACTION


def schedule_metadata_compaction(store: TableStore, spec: TableSpec) -> str | None:
    """Step 1: plans a compaction of the metadata table's groups due, under the lease, and
    leaves it pending; None when none is due (looked at before the lease is taken) or
    another instant is pending (then the next write asks again)."""
    kept = metadata_partitions.partitions(store)
    if not kept or not compaction.may_be_due(store):
        return None
    if Timeline(store, spec.options.merge_on_read).pending():  # asked again under the lease
        return None
    table = MetadataTable(store)
    found = compaction.slices(table, kept)
    if not compaction.due(found, compaction.schema_of(table, found)):
        return None

    def plan(txn: Transaction) -> dict[str, Any] | None:
        if any(i.id != txn.id for i in txn.timeline.pending()):
            return None
        return compaction.plan(store, kept)

    return schedule_instant(store, spec, ACTION, "compact-metadata", plan)


def execute_metadata_compaction(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Steps 2 and 3: the pending metadata compaction ``instant`` executed (its base files
    written) and completed (the metadata table's instant in its publish)."""
    txn = resume(store, spec, instant, ACTION, "metadata-compactor")
    entries = compaction.execute(store, instant, txn.plan)
    txn.commit(entries)
    return ServiceResult(ACTION, txn.id, len(entries[compaction.WRITTEN]))


class MetadataCompaction(Service):
    """Metadata compaction: completed in ``execute`` (it writes only files of its own
    instant, in the metadata table, and moves no key)."""

    action = ACTION

    def automatic(self, spec: TableSpec) -> bool:
        return spec.options.metadata_compaction_automatic

    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        """After every write of a table with Hudi's metadata table (``plan`` looks at its
        groups; a write of version 6 has none)."""
        return Scope(automatic=True) if spec.table_version >= 8 else None

    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        return schedule_metadata_compaction(store, spec)

    def execute(self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> Any:
        return execute_metadata_compaction(store, spec, instant)

    def reads_bytes(self, store: TableStore, timeline: Any, found: Any) -> int:
        # A few megabytes, merged and encoded under the interpreter lock every few writes:
        # in a thread it slowed the writes beside it (a 250-write soak's p50 +15%); in a
        # service process (as a log compaction) it does not.
        return HEAVY
