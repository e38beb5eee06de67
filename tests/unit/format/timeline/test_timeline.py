"""Instants: ids that always increase (and stay valid times), Hudi's file names per table
type, dynbucket's own records beside them, and completion that readers see whole."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dynbucket.base.errors import InstantNotFoundError, TableCorruptedError
from dynbucket.format.storage.store import TableStore
from dynbucket.format.timeline.timeline import (
    Instant,
    State,
    Timeline,
    next_instant_id,
    parse_instant_file,
)


def test_ids_increase_even_when_the_clock_goes_back() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    assert next_instant_id(None, now) == "20260102030405678"
    assert next_instant_id("20260102030405678", now) == "20260102030405679"
    # One millisecond later is a valid time, not the next integer.
    assert next_instant_id("20270101000059999", now) == "20270101000100000"
    assert next_instant_id("20271231235959999", now) == "20280101000000000"


def test_hudi_file_names_round_trip() -> None:
    assert parse_instant_file("20260102030405678.deltacommit.inflight") == Instant(
        "20260102030405678", "commit", State.INFLIGHT
    )
    assert parse_instant_file("20260102030405678.inflight").state == State.INFLIGHT  # COW
    assert parse_instant_file("20260102030405678.commit").completed
    assert parse_instant_file("20260102030405678.compaction.requested").action == "compaction"
    assert parse_instant_file("20260102030405678.deltacommit.tmp-abc") is None
    assert parse_instant_file("2026.commit") is None
    assert parse_instant_file("hoodie.properties") is None
    assert parse_instant_file("20260102030405678.clean", own=True).action == "clean"
    assert parse_instant_file("20260102030405678.clean") is None  # not Hudi's: ours


@pytest.mark.parametrize(
    ("merge_on_read", "names"),
    [
        (True, ["{i}.deltacommit", "{i}.deltacommit.inflight", "{i}.deltacommit.requested"]),
        (False, ["{i}.commit", "{i}.commit.requested", "{i}.inflight"]),
    ],
)
def test_a_write_is_spelled_as_hudi_spells_it(
    tmp_path: Path, merge_on_read: bool, names: list[str]
) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), merge_on_read)
    first = tl.start(tl.request("commit"), {"operation": "upsert"})
    assert tl.pending() == [first] and tl.completed() == []
    with pytest.raises(InstantNotFoundError, match="not completed"):
        tl.metadata(first)
    done = tl.complete(first, {"partitionToWriteStats": {}, "extraMetadata": {}})
    assert tl.completed() == [done] and tl.pending() == []
    # Hudi keeps an instant's requested and inflight files beside the completed one.
    listed = sorted(p.name for p in (tmp_path / ".hoodie").iterdir() if p.is_file())
    assert listed == sorted(n.format(i=done.id) for n in names)


def test_a_compaction_completes_as_a_commit_and_stays_a_compaction(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), True)
    done = tl.complete(tl.start(tl.request("compaction"), {}), {"compacted": True})
    assert (tmp_path / ".hoodie" / f"{done.id}.commit").exists()
    assert Timeline(TableStore.at(str(tmp_path))).completed() == [
        Instant(done.id, "compaction", State.COMPLETED)
    ]


def test_own_records_live_under_dynbucket_and_keep_one_file(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), True)
    done = tl.complete(tl.start(tl.request("clean"), {}), {"earliest-retained": "x"})
    assert tl.metadata(done)["earliest-retained"] == "x"
    assert [p.name for p in (tmp_path / ".hoodie" / ".dynbucket" / "timeline").iterdir()] == [
        f"{done.id}.clean"
    ]


def test_requested_ids_are_unique_and_increasing(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), True)
    ids = [tl.request("commit").id for _ in range(20)]
    assert ids == sorted(ids) and len(set(ids)) == 20


def test_discard_removes_a_pending_instant(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), True)
    pending = tl.start(tl.request("compaction"), {})
    tl.discard(pending)
    assert tl.instants() == []


@pytest.mark.parametrize("content", [b"", b'{"partitionToWriteStats": {"a": [', b"[1, 2]"])
def test_a_damaged_completed_instant_names_the_file_and_the_fix(
    tmp_path: Path, content: bytes
) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)), True)
    done = tl.complete(tl.start(tl.request("commit"), {}), {"extraMetadata": {}})
    path = tmp_path / ".hoodie" / f"{done.id}.deltacommit"
    path.write_bytes(content)
    with pytest.raises(TableCorruptedError, match=rf"{path}.*dynbucket rollback"):
        Timeline(TableStore.at(str(tmp_path))).metadata(done)
