"""Instants: ids that always increase, states, and completion that readers see whole."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dynbucket.actors.errors import InstantNotFoundError
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.timeline import State, Timeline, next_instant_id, parse_instant_file


def test_ids_increase_even_when_the_clock_goes_back() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    assert next_instant_id(None, now) == "20260102030405678"
    assert next_instant_id("20260102030405678", now) == "20260102030405679"
    assert next_instant_id("20270101000000999", now) == "20270101000001000"


def test_file_names_round_trip() -> None:
    assert parse_instant_file("20260102030405678.commit.inflight").state == State.INFLIGHT
    assert parse_instant_file("20260102030405678.commit").completed
    assert parse_instant_file("20260102030405678.commit.tmp-abc") is None
    assert parse_instant_file("2026.commit") is None
    assert parse_instant_file("20260102030405678.merge") is None


def test_only_completed_instants_have_metadata(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)))
    first = tl.start(tl.request("commit"), {"operation": "upsert"})
    assert tl.pending() == [first] and tl.completed() == []
    with pytest.raises(InstantNotFoundError, match="not completed"):
        tl.metadata(first)
    done = tl.complete(first, {"rows": 3})
    assert tl.completed() == [done] and tl.pending() == []
    assert tl.metadata(done)["rows"] == 3
    # Completion removed the requested and inflight files: one file per completed instant.
    assert sorted(p.name for p in (tmp_path / ".dynbucket" / "timeline").iterdir()) == [
        done.id + ".commit"
    ]


def test_requested_ids_are_unique_and_increasing(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)))
    ids = [tl.request("commit").id for _ in range(20)]
    assert ids == sorted(ids) and len(set(ids)) == 20


def test_discard_removes_a_pending_instant(tmp_path: Path) -> None:
    tl = Timeline(TableStore.at(str(tmp_path)))
    pending = tl.start(tl.request("compaction"))
    tl.discard(pending)
    assert tl.instants() == []
