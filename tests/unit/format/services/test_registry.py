"""The registry of table services: every service the timeline treats as one that runs
beside the writes is registered, and the due services run in the registry's order."""

from __future__ import annotations

import pyarrow as pa

from dynbucket.format.services.due import Upkeep, due
from dynbucket.format.services.registry import SERVICES, service
from dynbucket.format.services.service import Scope
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Instant, State
from dynbucket.format.timeline.transaction import DETACHED_ACTIONS, WrittenFile

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def test_every_detached_action_is_a_registered_service() -> None:
    """A service the timeline never rolls back (``DETACHED_ACTIONS``) must be one the
    runner can execute again when its executor died, and the other way round."""
    assert sorted(SERVICES) == sorted(DETACHED_ACTIONS)
    for action in DETACHED_ACTIONS:
        assert service(action).action == action


def test_due_services_come_in_the_registry_order_with_their_scope() -> None:
    """Each service decides whether a write made it due; they come in the registry's
    order (compaction first: it makes the slices a clean may drop)."""
    spec = TableSpec(SCHEMA, ("id",), ("day",), options=TableOptions(clean_max_commits=1))
    files = [
        WrittenFile("day=1", "/t/a", "log", 1, 1, "a", slice_logs=5, base_bytes=10, log_bytes=9),
        WrittenFile("day=1", "/t/b", "log", 1, 1, "b", slice_logs=5, base_bytes=10, log_bytes=1),
        WrittenFile("day=1", "/t/i", "index", 1, 1),
    ]
    instants = [Instant("20260101000000000", "commit", State.COMPLETED)]
    found = due(spec, files, _Timeline(instants))  # type: ignore[arg-type]
    scopes = found.scopes()
    assert list(scopes) == ["compaction", "logcompaction", "clean", "index-compaction"]
    assert (scopes["compaction"].groups, scopes["logcompaction"].groups) == ({"a"}, {"b"})
    assert scopes["clean"] == Scope(automatic=True)
    assert scopes["index-compaction"] == Scope(("day=1",), automatic=True)
    assert found.index_partitions == ("day=1",)
    assert Upkeep(archive=True).scopes() == {}  # archival is no instant-of-its-own service


class _Timeline:
    def __init__(self, instants: list[Instant]) -> None:
        self._instants = instants

    def instants(self) -> list[Instant]:
        return self._instants
