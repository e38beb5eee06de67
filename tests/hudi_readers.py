"""Third-party readers of a dynbucket table, and the checks that they read what dynbucket reads.

* hudi-rs (the ``hudi`` package): snapshot, time travel, incremental and read-optimized
  queries, in this process;
* daft (``daft.read_hudi``, copy-on-write tables): in ``.venv-readers`` (daft needs a pyarrow
  older than the project's), which ``make test`` creates.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.format.file_group import adopted
from dynbucket.table import Table

READERS_PYTHON = Path(__file__).resolve().parents[1] / ".venv-readers" / "bin" / "python"
COMMIT_TIME = "_hoodie_commit_time"


def hudi_read(uri: str, **options: str) -> pa.Table:
    """A hudi-rs read of the table: ``as_of``, ``start`` (incremental after it, up to
    ``end``) or ``read_optimized="true"``."""
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(uri).build()
    opts = HudiReadOptions()
    if "as_of" in options:
        opts = opts.with_as_of_timestamp(options["as_of"])
    if "start" in options:
        opts = opts.with_query_type(HudiQueryType.Incremental).with_start_timestamp(
            options["start"]
        )
    if "end" in options:
        opts = opts.with_end_timestamp(options["end"])
    if options.get("read_optimized"):
        opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    batches = [b for b in table.read(opts) if b.num_rows]
    return pa.Table.from_batches(batches) if batches else pa.table({})


def rows_by_key(
    table: pa.Table, keys: Sequence[str], fields: Sequence[str], instant: str | None = None
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """key -> the row's ``fields`` (and its commit time from column ``instant``)."""
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in table.to_pylist():
        key = tuple(_plain(r[k]) for k in keys)
        assert key not in out, f"two live rows of key {key}"  # I2, for either reader
        out[key] = tuple(_plain(r[f]) for f in fields) + ((r[instant],) if instant else ())
    return out


def _diff(theirs: dict[Any, Any], ours: dict[Any, Any], most: int = 5) -> str:
    """The keys whose rows differ (the first ``most``: hudi-rs's row, then ours), for a
    failure's message: a rare difference is understood from the message alone."""
    keys = sorted(
        (k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k)), key=repr
    )
    shown = "; ".join(f"{k}: hudi-rs {theirs.get(k)} ours {ours.get(k)}" for k in keys[:most])
    return f"{len(keys)} key(s): {shown}"


def _all_rows(table: pa.Table, fields: Sequence[str]) -> list[tuple[Any, ...]]:
    """Every row's ``fields``, sorted (a table with no rows has none)."""
    if table.num_rows == 0:
        return []
    # By text: values may be null (a partial upsert's new keys), which do not order.
    return sorted((tuple(_plain(r[f]) for f in fields) for r in table.to_pylist()), key=repr)


def check_hudi_reads(
    t: Table, incremental_after: str | None = None, time_travel: bool = True
) -> None:
    """hudi-rs reads the table as dynbucket does: the snapshot (with commit times), every
    retained completed commit as of itself (``time_travel``), read-optimized queries against
    dynbucket's base files, and (after ``incremental_after``) the changed records."""
    spec = t._spec
    keys, fields = _keys(t), t.schema.names  # the schema now (it may have evolved)
    meta = bool(spec.meta_fields)
    ours = t.to_arrow()
    theirs = hudi_read(t.uri)
    theirs_rows = rows_by_key(theirs, keys, fields, COMMIT_TIME if meta else None)
    ours_rows = rows_by_key(ours, keys, fields, "_instant" if meta else None)
    assert theirs_rows == ours_rows, f"hudi-rs snapshot differs: {_diff(theirs_rows, ours_rows)}"
    snapshot = t.snapshot()
    floor = snapshot.timeline.archived().floor
    completed = snapshot.timeline.completed("commit", "compaction", "logcompaction")
    # Adopted with deduplicate=True: before that instant a key may have two live rows.
    deduplicated = str(adopted.load(t._store).deduplicated.get("instant", ""))
    for instant in completed if time_travel else []:
        if snapshot.earliest_retained and instant.id < snapshot.earliest_retained:
            continue  # cleaned: neither reader can read it whole
        if instant.id <= floor:
            continue  # archived (an archival that crashed left its file on the timeline)
        # As of an instant before a schema change, the fields of then (hudi-rs may read
        # the later fields too, as nulls).
        then = t.snapshot(instant.id).spec.schema.names
        if instant.id < deduplicated:
            assert _all_rows(hudi_read(t.uri, as_of=instant.id), then) == _all_rows(
                t.to_arrow(as_of=instant.id), then
            ), f"hudi-rs as of {instant.id} differs"
            continue
        theirs_then = _as_of_or_promoted(t, instant.id)
        if theirs_then is None:
            continue
        assert rows_by_key(theirs_then, keys, then) == rows_by_key(
            t.to_arrow(as_of=instant.id), keys, then
        ), f"hudi-rs as of {instant.id} differs"
    # Base files alone: until a compaction a deleted record shows there, and a deleted key
    # that came back into another file group shows twice; compared as rows, not by key.
    assert _all_rows(hudi_read(t.uri, read_optimized="true"), fields) == _all_rows(
        t.to_arrow(read_optimized=True), fields
    ), "hudi-rs read-optimized differs"
    if incremental_after is not None and meta:
        check_incremental(t, incremental_after, ours)


def _as_of_or_promoted(t: Table, instant: str) -> pa.Table | None:
    """hudi-rs's read as of ``instant``, or None where it cannot read it: hudi-rs 0.5 reads
    every instant at the table's latest schema, so a log block written before a type
    promotion holds "an older type" and is refused, naming the field. Only that refusal,
    naming a field whose type changed after ``instant``, is accepted."""
    try:
        return hudi_read(t.uri, as_of=instant)
    except Exception as e:  # hudi-rs's HudiCoreError, which the package does not export
        if type(e).__name__ != "HudiCoreError":
            raise
        then, now = t.snapshot(instant).spec.schema, t.schema
        promoted = [
            f.name for f in then if f.name in now.names and now.field(f.name).type != f.type
        ]
        if not any(f"partial-update column '{name}' has type" in str(e) for name in promoted):
            raise
        return None


def check_incremental(t: Table, after: str, ours: pa.Table) -> None:
    """hudi-rs's incremental read after ``after`` returns every live record that changed
    since, as it is now; any other record it returns was written since (hudi-rs also returns
    a record written since that lost to an older one by its ordering value). "Since": by
    instant time on timeline layout 1, by completion time on layout 2 (as hudi-rs ranges)."""
    keys, fields = _keys(t), t.schema.names
    timeline = t.snapshot().timeline
    completion = {i.id: timeline.completion_of(i) for i in timeline.completed()}
    start = completion.get(after, after)

    def since(instant: str) -> bool:
        return completion.get(instant, instant) > start

    theirs = rows_by_key(hudi_read(t.uri, start=start), keys, fields, COMMIT_TIME)
    changed = {k: v for k, v in rows_by_key(ours, keys, fields, "_instant").items() if since(v[-1])}
    assert {k: theirs.get(k) for k in changed} == changed, "hudi-rs incremental misses changes"
    assert all(since(v[-1]) for v in theirs.values()), "hudi-rs incremental: an old record"


def _plain(value: Any) -> Any:
    """A value as both readers mean it: hudi-rs reads a timestamp without zone as UTC."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _keys(t: Table) -> list[str]:
    """What identifies a record: its partition and its key."""
    return list(dict.fromkeys([*t._spec.partition_by, *t._spec.record_key]))


def hudi_can_merge(t: Table) -> bool:
    """Whether hudi-rs merges the table's records (it merges log records by
    ``_hoodie_record_key``: a merge-on-read table without meta fields reads unmerged)."""
    return bool(t._spec.meta_fields) or not t._spec.options.merge_on_read


def daft_read(uris: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows as daft reads it (copy-on-write tables)."""
    assert READERS_PYTHON.exists(), (
        f"{READERS_PYTHON} is missing: `make test` creates it (daft needs its own pyarrow)"
    )
    script = textwrap.dedent(
        """
        import json, os, sys
        import daft
        out = {}
        for uri in json.loads(sys.argv[1]):
            out[uri] = daft.read_hudi(uri).to_arrow().to_pylist()
        print(json.dumps(out, default=str), flush=True)
        # daft's native threads can take the GIL while the interpreter finalizes
        # (a "PyGILState_Release ... must be current" abort after the answer was
        # printed, once in CI): the answer is out, leave without finalizing.
        os._exit(0)
        """
    )
    done = subprocess.run(
        [str(READERS_PYTHON), "-c", script, json.dumps(list(uris))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
