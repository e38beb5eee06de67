"""Where a fleet's slots go (``slot_nodes``): the alive nodes with CPUs, in turn."""

from __future__ import annotations

from typing import Any

import pytest

from dynbucket.actors.fleet import slot_nodes
from dynbucket.base.errors import RuntimeSetupError


def _node(node_id: str, cpus: float, alive: bool = True) -> dict[str, Any]:
    return {"NodeID": node_id, "Alive": alive, "Resources": {"CPU": cpus} if cpus else {}}


def test_slots_go_to_the_nodes_in_turn() -> None:
    nodes = [_node("c", 2), _node("a", 2), _node("b", 2)]
    assert slot_nodes(nodes, 5) == ["a", "b", "c", "a", "b"]
    assert slot_nodes(nodes, 3, offset=4) == ["b", "c", "a"]


def test_dead_nodes_and_a_head_without_cpus_get_no_slot() -> None:
    nodes = [_node("head", 0), _node("w1", 4), _node("w2", 4, alive=False), _node("w3", 1)]
    assert slot_nodes(nodes, 4) == ["w1", "w3", "w1", "w3"]


def test_nodes_without_cpus_are_used_when_no_node_has_any() -> None:
    assert slot_nodes([_node("x", 0), _node("y", 0, alive=False)], 2) == ["x", "x"]


def test_no_alive_node_is_a_clear_error() -> None:
    with pytest.raises(RuntimeSetupError, match="no alive node"):
        slot_nodes([_node("x", 2, alive=False)], 1)
