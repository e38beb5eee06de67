"""``dynbucket bench adopt``: what adopting a Hudi 1.x table costs, and where an index of
its keys is cheaper to get: from the rows, or from its metadata table's record index.

Builds a version 9 merge-on-read table of ``keys`` keys in process (4 partitions, a
partition-scoped dynamic index, so its metadata table keeps Hudi's partitioned record
index; then an update of a tenth of the keys, a log on every group), and removes
``.hoodie/.dynbucket/``: a table as Hudi 1.1 leaves one. Then, taking turns ``runs`` times:

* ``rows``: what adoption's index step reads (``adoption/build_index.slice_entries``: every
  slice's live keys merged, spelled and hashed, in shares of slices beside it);
* ``record index``: the least an index taken from the record index costs instead (every
  group read whole, each key's text read back into its fields and hashed; no check that
  the index is whole, which would need the rows again or each file's footer);
* ``adopt``: ``Table.adopt`` whole (the rows' index, and the record index read to check it
  is whole before it is kept), then ``Table.undo_adoption``.

Prints the medians and the ratio record index / rows: above 1, the rows are the cheaper
source as well as the one that finds a key in two rows or spelled otherwise.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dynbucket.base.keyhash import key_hashes
from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.bench.soak import SCHEMA, rows_of
from dynbucket.format.adoption.build_index import SHARE, in_threads, slice_entries
from dynbucket.format.hudi.meta_fields import parse_record_keys
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.read.snapshot import Snapshot
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.paths import META_DIR
from dynbucket.format.table.spec import TableSpec
from dynbucket.options import DynamicBucketIndex
from dynbucket.table import Table

#: Keys per write while the table is built.
CHUNK = 200_000


def run(keys: int, runs: int, workdir: str | None) -> dict[str, Any]:
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-adopt-"))
    uri = str(root / "t")
    if Path(uri).exists():
        shutil.rmtree(uri)
    spec, index = _hudi_table(uri, keys)
    store = TableStore.at(uri)
    cases = {
        "rows": Measurement("rows (adoption's index step)", keys),
        "record index": Measurement("record index (read, keys hashed)", keys),
        "adopt": Measurement("Table.adopt whole", keys),
    }
    for _ in range(runs):
        seconds, found = timed(lambda: _from_rows(store, spec))
        cases["rows"].seconds.append(seconds)
        assert found == keys, (found, keys)
        seconds, found = timed(lambda: _from_record_index(store, spec))
        cases["record index"].seconds.append(seconds)
        assert found == keys, (found, keys)
        seconds, table = timed(lambda: Table.adopt(uri, index=index))
        cases["adopt"].seconds.append(seconds)
        table.close()
        Table.undo_adoption(uri)
    ratio = cases["record index"].median / cases["rows"].median
    return print_report(
        "adopt", "keys", list(cases.values()), record_index_over_rows=round(ratio, 2)
    )


def _hudi_table(uri: str, keys: int) -> tuple[TableSpec, DynamicBucketIndex]:
    """The table (module doc), as Hudi 1.1 would leave it; returns its definition and
    index."""
    rng = np.random.default_rng(11)
    options = TableOptions(
        table_version=9,
        compaction_async=False,
        clean_automatic=False,
        archive_automatic=False,
        index_compaction_automatic=False,
    )
    index = DynamicBucketIndex(max_keys_per_bucket=100_000)
    table = Table.create(uri, SCHEMA, "id", "region", "ts", index, options)
    for first in range(0, keys, CHUNK):
        table.upsert(rows_of(np.arange(first, min(keys, first + CHUNK)), 0, rng))
    table.upsert(rows_of(rng.choice(keys, keys // 10, replace=False), 1, rng))
    spec = table.spec
    table.close()
    shutil.rmtree(Path(uri) / META_DIR)
    return spec, index


def _from_rows(store: TableStore, spec: TableSpec) -> int:
    refs = list(Snapshot(store, spec).slices())
    shares = [refs[i : i + SHARE] for i in range(0, len(refs), SHARE)]
    threads = in_threads()
    try:
        found = threads.map(slice_entries, [(store, spec, "0", s) for s in shares])
    finally:
        threads.close()
    return sum(t.num_rows for t in found)


def _from_record_index(store: TableStore, spec: TableSpec) -> int:
    located = MetadataTable(store).record_index_table()
    fields = [spec.schema.field(name) for name in spec.record_key]
    values = parse_record_keys(located.column("key"), fields)
    assert values is not None
    hashes = pa.array(key_hashes(values, spec.record_key), pa.int64())
    return len(hashes)
