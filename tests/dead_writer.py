"""A writer that wrote data and index files and then vanished, for rollback tests."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from dynbucket.base.columns import BUCKET, IS_NEW
from dynbucket.format.file_group.writer import write_file_groups
from dynbucket.format.records.incoming import prepare
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.table import Table


def die_mid_instant(table: Table, rows: list[dict[str, Any]]) -> str:
    """Begins an instant, writes ``rows`` into bucket 0 of their partitions (data and index
    files, as a real writer would), then dies: its heartbeat stops and its lease runs out at
    once. Returns the instant, which stays pending until the next writer rolls it back."""
    # A lease of 2 s: a begin on S3 on a loaded machine (the cluster session's three raylets
    # and Spark on 2 cores) outlasted a 0.5 s lease's renewals and failed in its own begin.
    txn = Transaction.begin(table._store, table._spec, "commit", "upsert", lease_seconds=2.0)
    prepared = prepare(table._spec, pa.Table.from_pylist(rows, table._spec.schema))
    n = prepared.num_rows
    prepared = prepared.append_column(BUCKET, pa.repeat(pa.scalar(0, pa.int32()), n))
    prepared = prepared.append_column(IS_NEW, pa.repeat(pa.scalar(True), n))
    visible = {i.id for i in txn.timeline.completed()}
    ctx = WriteContext(
        TableRef.of(table._store, table._spec), txn.id, frozenset(visible), Operation.UPSERT
    )
    write_file_groups(ctx, prepared)
    txn.lock._stop.set()  # the heartbeat dies with the writer
    # and its lease runs out (a lease shorter than a begin takes on S3 would lapse in it)
    time.sleep(max(0.0, txn.lock._expires_at - time.time()) + 0.05)
    return txn.id
