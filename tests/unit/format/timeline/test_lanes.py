"""A writer's lane among the live writers' (``format/timeline/lanes.py``), step by step."""

from __future__ import annotations

from dynbucket.format.timeline.lanes import LOOK_MAX, Lanes, lane_of, plan_fields


def test_a_writer_alone_is_lane_0_of_1() -> None:
    assert Lanes(60.0).choose({}, now=0.0) == (0, 1)


def test_a_writer_beside_another_takes_the_next_lane_and_keeps_it() -> None:
    a, b = Lanes(60.0, writer="a"), Lanes(60.0, writer="b")
    assert a.choose({}, now=0.0) == (0, 1)
    assert b.choose({0: "a"}, now=1.0) == (1, 2)
    # b between two writes: a keeps counting b's lane for the expiry...
    assert a.choose({1: "b"}, now=2.0) == (0, 2)
    assert a.choose({}, now=50.0) == (0, 2)
    assert b.choose({}, now=50.0) == (1, 2)
    # ...then forgets it; b alone keeps its lane and the buckets it filled.
    assert a.choose({}, now=63.0) == (0, 1)
    assert b.choose({}, now=70.0) == (1, 2)


def test_a_lane_another_live_writer_holds_is_given_up_for_the_smallest_free() -> None:
    c = Lanes(60.0, writer="c", lane=0)
    assert c.choose({0: "a", 1: "b"}, now=0.0) == (2, 3)
    # Its own instant's lane, read back from a pending instant of its own, is no other's.
    assert c.choose({2: "c"}, now=1.0) == (2, 3)


def test_a_lane_seen_on_a_commit_beside_counts_as_alive() -> None:
    a = Lanes(2.0, writer="a")
    assert a.choose({}, now=0.0) == (0, 1)
    a.saw(1, "b", now=0.5)
    a.saw(3, "a", now=0.5)  # its own: not another writer's
    assert a.choose({}, now=1.0) == (0, 2)
    assert a.choose({}, now=3.0) == (0, 1)


def test_a_plan_names_the_lane_and_a_plan_without_one_names_none() -> None:
    a = Lanes(60.0, writer="w1")
    assert lane_of(plan_fields(a, (2, 3))) == (2, "w1")
    assert plan_fields(None, (0, 1)) == {}
    assert lane_of({}) is None
    assert lane_of({"lane": True, "writer": "x"}) is None


def test_each_completed_write_is_looked_at_once_the_newest_first_begin_at_most() -> None:
    a = Lanes(60.0, writer="a")
    many = [f"2026120210{i:05d}" for i in range(LOOK_MAX + 5)]
    assert a.to_look_at(many) == many[-LOOK_MAX:]
    assert a.to_look_at(many) == []
    assert a.to_look_at([*many, "20261202109999999"]) == ["20261202109999999"]
    # A write completed since, with an older id than one looked at (it was pending then,
    # and counted as live), is not looked at again.
    assert a.to_look_at(["2026120210000000", "20261202109999999"]) == []
