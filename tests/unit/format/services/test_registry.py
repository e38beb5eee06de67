"""The registry of table services: every service the timeline treats as one that runs
beside the writes is registered, and the due services run in the registry's order."""

from __future__ import annotations

from dynbucket.format.services.due import Upkeep
from dynbucket.format.services.registry import SERVICES, service
from dynbucket.format.services.service import Scope
from dynbucket.format.timeline.transaction import DETACHED_ACTIONS


def test_every_detached_action_is_a_registered_service() -> None:
    """A service the timeline never rolls back (``DETACHED_ACTIONS``) must be one the
    runner can execute again when its executor died, and the other way round."""
    assert sorted(SERVICES) == sorted(DETACHED_ACTIONS)
    for action in DETACHED_ACTIONS:
        assert service(action).action == action


def test_due_services_come_in_the_registry_order_with_their_scope() -> None:
    due = Upkeep(compaction=True, clean=True, index_partitions=("day=1",), log_compaction=True)
    scopes = due.scopes()
    assert list(scopes) == ["compaction", "logcompaction", "clean", "index-compaction"]
    assert scopes["clean"] == Scope(automatic=True)
    assert scopes["index-compaction"] == Scope(("day=1",), automatic=True)
    assert Upkeep(archive=True).scopes() == {}  # archival is no instant-of-its-own service
