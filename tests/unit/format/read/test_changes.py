"""Incremental reads (``Table.changes``): the latest version of each record the instants of
a range wrote, equal to an in-memory model and to hudi-rs's incremental read on every range,
for merge-on-read and copy-on-write, across a compaction, a log compaction and a clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import ConfigError, IncompleteRangeError, InstantNotFoundError
from dynbucket.cli import commands as cli
from dynbucket.format.services import clean, log_compaction
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import archive
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.table import Table
from tests.hudi_readers import COMMIT_TIME, hudi_read

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
# Services by hand; a clean keeps the last 3 commits.
MANUAL = dict(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    cleaner_commits_retained=3,
)


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table(
        {"id": ids, "day": [f"d{int(i[1:]) % 2}" for i in ids], "v": [v] * len(ids)},
        schema=SCHEMA,
    )


def _changed(rows: pa.Table, time_column: str) -> dict[str, tuple[int, str]]:
    out = {}
    for r in rows.to_pylist():
        assert r["id"] not in out, f"two rows of {r['id']}"
        out[r["id"]] = (r["v"], r[time_column])
    return out


def _completions(t: Table) -> dict[str, str]:
    """Each completed instant's completion time (its id on timeline layout 1)."""
    timeline = Timeline(t._store, t._spec.options.merge_on_read)
    return {i.id: timeline.completion_of(i) for i in timeline.completed()}


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_changes_are_the_model_and_hudi_rs_on_every_range(
    tmp_path: Path, table_type: str, version: int
) -> None:
    """Ranges by instant time (version 6) or by completion time (version 9, as hudi-rs)."""
    options = TableOptions(table_type=table_type, table_version=version, **MANUAL)  # type: ignore[arg-type]
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", options=options)
    live: dict[str, tuple[int, str]] = {}  # the model: key -> (value, commit time)
    states: dict[str, dict[str, tuple[int, str]]] = {}  # instant -> the model as of it

    def write(ids: list[str], v: int, delete: bool = False) -> str:
        if delete:
            instant = t.delete(pa.table({"id": ids, "day": [f"d{int(i[1:]) % 2}" for i in ids]}))
        else:
            instant = t.upsert(_rows(ids, v))
        for k in ids:
            if delete:
                live.pop(k, None)
            else:
                live[k] = (v, instant.instant)
        states[instant.instant] = dict(live)
        return instant.instant

    # Cold keys: a base large enough that a slice's logs are merged, not compacted.
    write([f"k{i}" for i in range(12)] + [f"c{i}" for i in range(20_000)], 1)
    write(["k1", "k2", "k12"], 2)
    write(["k3"], 0, delete=True)
    write(["k2", "k4"], 3)
    if table_type == "MERGE_ON_READ":
        merged = log_compaction.schedule_log(t._store, t._spec, 2)  # restates records as they are
        assert merged is not None
        log_compaction.run_log(t._store, t._spec, merged)
        write(["k5"], 4)
        done = t.compact()  # a base file of records with their own commit times
        assert done.instant is not None
    write(["k6", "k13"], 5)
    write(["k1"], 6)
    instants = list(states)

    done = _completions(t)
    at = {c: i for i, c in done.items()}  # a completion time -> its instant

    def check(start: str, end: str | None) -> None:
        # start and end are instants (version 6) or their completion times (version 9).
        upto = at.get(end, end) if end else instants[-1]
        low = at.get(start, start)
        want = {k: s for k, s in states[upto].items() if low < s[1] <= upto}
        ours = _changed(t.changes(start, end), "_instant")
        assert ours == want, (start, end)
        theirs = hudi_read(t.uri, start=start, **({"end": end} if end else {}))
        got = _changed(theirs, COMMIT_TIME) if theirs.num_columns else {}
        assert got == want, ("hudi-rs", start, end)

    points = [done[i] for i in instants]
    for i, start in enumerate(points):
        for end in [*points[i + 1 :], None]:
            check(start, end)
    check("20000101000000000", points[2])  # from before the table: everything
    everything = _changed(t.changes("20000101000000000"), "_instant")
    assert _changed(t.changes("000"), "_instant") == everything  # Hudi's "from the beginning"
    assert t.changes(points[-1]).num_rows == 0
    plain = t.changes(points[0], meta_columns=False, columns=["id", "v"])
    assert plain.column_names == ["id", "v"]
    # A clean keeps the last 3 commits: an end before them is gone, a start is not.
    cleaned = clean.clean(t._store, t._spec)
    assert cleaned.instant is not None
    with pytest.raises(InstantNotFoundError, match="was cleaned"):
        t.changes(points[0], points[1])
    check(points[0], None)
    # Archived: which groups the archived instants changed is not known.
    floor = archive.archive(t._store, t._spec.options.merge_on_read, 2, 3, 60).floor
    assert floor
    with pytest.raises(InstantNotFoundError, match=f"up to {floor} .* were archived"):
        t.changes(points[0])
    assert t.changes(done[floor]).num_rows == sum(s[1] > floor for s in live.values())
    assert _changed(t.changes("000"), "_instant") == live  # every live record, archived or not


def test_show_changes_and_bad_ranges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v")
    first = t.upsert(_rows(["k1", "k2"], 1)).instant
    second = t.upsert(_rows(["k2", "k3"], 2)).instant
    args = cli.parser().parse_args(["show", t.uri, "--changes", first])
    assert cli._run(args, sys.stderr) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"changes after {first} up to {second}: 2 record(s) (deletes not shown)",
        f"  {second}  id=k2  day=d0  v=2",
        f"  {second}  id=k3  day=d1  v=2",
    ]
    args = cli.parser().parse_args(["show", t.uri, "--changes", "000"])  # from the beginning
    assert cli._run(args, sys.stderr) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"changes after 000 up to {second}: 3 record(s) (deletes not shown)"
    assert [r.split()[1] for r in out[1:]] == ["id=k1", "id=k2", "id=k3"]
    with pytest.raises(ConfigError, match="start 'yesterday' is not an instant time"):
        t.changes("yesterday")
    with pytest.raises(InstantNotFoundError, match="no completed instant 20991231000000000"):
        t.changes(first, "20991231000000000")
    bare = Table.create(
        str(tmp_path / "bare"),
        SCHEMA,
        "id",
        "day",
        "v",
        options=TableOptions(populate_meta_fields=False),
    )
    bare.upsert(_rows(["k1"], 1))
    with pytest.raises(ConfigError, match="populate_meta_fields=False"):
        bare.changes(first)


@pytest.mark.parametrize("version", [6, 9])
def test_a_change_feed_never_skips_a_write_that_completes_after_a_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """Writer A begins, writer B writes and commits, a consumer reads, then A commits (its
    instant time older than B's): the consumer's next read gets A's rows. Before, a feed that
    passed the newest ``_instant`` it read as its next start never got them."""
    from tests.unit.format.timeline.test_conflicts import _beside

    options = TableOptions(table_version=version, **MANUAL)  # type: ignore[arg-type]
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", options=options)
    t.upsert(_rows(["k0", "k1"], 1))
    feed = {"start": t.changes_end(), "rows": {}}  # a consumer following the feed
    newest = {"start": max(t.to_arrow().column("_instant").to_pylist()), "rows": {}}

    def consume() -> None:
        end = t.changes_end()
        read = t.changes(feed["start"], end)
        theirs = hudi_read(t.uri, start=feed["start"], end=end)
        assert _changed(read, "_instant") == (
            _changed(theirs, COMMIT_TIME) if theirs.num_columns else {}
        )
        feed["rows"].update({r["id"]: r["v"] for r in read.to_pylist()})
        feed["start"] = end
        if version == 6:  # the README's other rule: the newest _instant read as the start
            read = t.changes(newest["start"])
            newest["rows"].update({r["id"]: r["v"] for r in read.to_pylist()})
            times = read.column("_instant").to_pylist()
            newest["start"] = max([newest["start"], *times])

    other = Table.open(t.uri)

    def b_then_read() -> None:
        other.upsert(_rows(["k3"], 3))  # B: requested after A, completed before it
        consume()
        if version == 6:
            with pytest.raises(IncompleteRangeError, match="has not completed"):
                t.changes("000", max(other.to_arrow().column("_instant").to_pylist()))

    _beside(monkeypatch, b_then_read)
    a = t.upsert(_rows(["k1", "k2"], 2))  # A
    monkeypatch.undo()
    assert a.instant < max(t.to_arrow().column("_instant").to_pylist())  # older, completed later
    consume()
    want = {"k1": 2, "k2": 2, "k3": 3}
    assert feed["rows"] == want
    if version == 6:
        assert newest["rows"] == want
