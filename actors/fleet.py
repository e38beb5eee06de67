"""The driver's side of the assigner actors: one named actor per slot, for one table.

Actors are owned by the driver's Ray job (not detached): when the driver exits, they go with
it, so a restarted driver always starts from caches it can trust (bootstrapped from the
record-level index). Changing the slot count replaces the whole fleet.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from dynbucket.actors.actor import assigner_actor_class
from dynbucket.actors.allocator import ALONE, Lane
from dynbucket.actors.assigner import BucketAssigner, IndexSource, NewKeys
from dynbucket.actors.checkpoints import Gone, by_slot
from dynbucket.actors.link import RayLink
from dynbucket.base.errors import RuntimeSetupError
from dynbucket.base.options import DynamicBucketIndex

log = logging.getLogger(__name__)

_TOKEN_MEMORY = 1 << 20
"""Bytes of Ray's logical memory each slot reserves: enough for Ray to honour its placement."""


class AssignerFleet:
    """N assigner actors for one table, named ``dynbucket/<label>/<fleet id>/slot-<i>-of-<N>``."""

    def __init__(
        self,
        link: RayLink,
        label: str,
        num_slots: int,
        options: DynamicBucketIndex,
        source_factory: Callable[[], IndexSource],
        num_cpus: float = 0,
        wait: bool = True,
        core: type[BucketAssigner] = BucketAssigner,
    ) -> None:
        """Starts the actors (and, with ``wait``, waits until each answers).

        Args:
            link: the Ray cluster and namespace.
            label: names the fleet in actor names (e.g. the table's id).
            num_slots: number of slots N.
            options: the table's dynamic bucket options.
            source_factory: builds, inside each actor, its reader of the record-level index.
            num_cpus: CPUs each actor reserves. 0 by default: an actor works only while a
                Spark task waits on it, so the task's core is the one it uses.
            wait: False returns at once, the actors starting while the caller does other
                work; their first call (``begin``) waits for them.
            core: the plain assigner each actor adapts (``AssignerActor``).
        """
        self.link = link
        self.restart_timeout = 60.0
        self.num_slots = num_slots
        self.options = options
        fleet_id = uuid.uuid4().hex[:8]
        self.names = [
            f"dynbucket/{label}/{fleet_id}/slot-{i}-of-{num_slots}" for i in range(num_slots)
        ]
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # Over a cluster, the slots (their caches: memory, bootstrap reads) go to the nodes in
        # turn, not all beside the driver. The affinity is soft: a slot whose node is gone, or
        # cannot hold it, is started (and restarted) elsewhere. Ray places an actor that asks
        # for no resource on a random node whatever its strategy (ray#25344; seen: SPREAD put
        # 3 slots on one of 3 nodes), hence the token 1 MiB of Ray's logical memory.
        nodes = slot_nodes(ray.nodes(), num_slots, offset=int(fleet_id, 16))
        self.handles = [
            assigner_actor_class(
                name=name,
                namespace=link.namespace,
                num_cpus=num_cpus,
                memory=_TOKEN_MEMORY,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True),
            ).remote(i, num_slots, options, source_factory, core)
            for i, (name, node) in enumerate(zip(self.names, nodes, strict=True))
        ]
        if wait:
            ray.get([h.ping.remote() for h in self.handles])

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None:
        self._all("begin", checkpoint, latest_successful, lanes)

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[list[str]]:
        """Every slot's snapshot, with every slot's new keys of ``checkpoint`` (partition ->
        bucket -> keys) when it committed."""
        return self._all("snapshot", checkpoint, latest_successful, new_keys)

    def abort(self, checkpoint: int) -> int:
        """Drops the checkpoint's mappings in every slot. A slot that cannot be reached lost
        them with its state; the fleet then closes, and the next write starts a new one."""
        dropped = self._all_or_close("abort", checkpoint)
        return sum(dropped) if dropped is not None else 0

    def leave(self, checkpoint: int, gone: Gone) -> None:
        """Every slot notes its keys of ``gone`` (``checkpoints.Assigners.leave``)."""
        batches = by_slot(gone, self.num_slots)
        self._each("leave", {s: (checkpoint, b) for s, b in batches.items()})

    def reset(self) -> bool:
        """Empties every slot's caches (another writer committed), keeping the processes: a
        second or two less than a new fleet, and the slots stay on their nodes. A slot that
        cannot be reached or refuses (uncommitted mappings) closes the fleet instead.

        Returns:
            Whether the fleet is still open.
        """
        return self._all_or_close("reset") is not None

    def catch_up(self, latest_successful: int) -> bool:
        """Brings every slot's caches up to the table as committed now (another writer
        committed; ``BucketAssigner.catch_up``). A slot that cannot be reached or refuses
        closes the fleet instead.

        Returns:
            Whether the fleet is still open.
        """
        return self._all_or_close("catch_up", latest_successful) is not None

    @property
    def closed(self) -> bool:
        return not self.handles

    def stats(self) -> list[dict[str, Any]]:
        return self._all("stats")

    def close(self) -> None:
        """Kills the actors (their caches are only caches: nothing is lost)."""
        import ray

        for h in self.handles:
            ray.kill(h, no_restart=True)
        self.handles = []

    def _all_or_close(self, method: str, *args: Any) -> list[Any] | None:
        """``_all``, or None having closed the fleet when a slot failed it."""
        try:
            return self._all(method, *args)
        except Exception as e:
            log.warning("assigner slots failed %s%s (%s); closing them", method, args, e)
            self.close()
            return None

    def _all(self, method: str, *args: Any) -> list[Any]:
        """Calls ``method`` on every slot (``_each``)."""
        results = self._each(method, dict.fromkeys(range(len(self.handles)), args))
        return [results[i] for i in range(len(self.handles))]

    def _each(self, method: str, calls: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """Calls ``method`` on each slot of ``calls`` with its arguments. A slot that Ray is
        restarting answers ``ActorUnavailableError`` for a moment; the call is retried
        (every fleet method is safe to repeat; a restarted slot refuses a checkpoint it
        lost with ``AssignerRestartedError``)."""
        import ray

        deadline = time.monotonic() + self.restart_timeout
        results: dict[int, Any] = {}
        while True:
            pending = [i for i in calls if i not in results]
            refs = [getattr(self.handles[i], method).remote(*calls[i]) for i in pending]
            for i, ref in zip(pending, refs, strict=True):
                try:
                    results[i] = ray.get(ref)
                except ray.exceptions.ActorUnavailableError:
                    if time.monotonic() > deadline:
                        raise
            if len(results) == len(calls):
                return results
            time.sleep(0.2)


def slot_nodes(nodes: list[dict[str, Any]], num_slots: int, offset: int = 0) -> list[str]:
    """The node of each slot: the alive nodes with CPUs (where Spark tasks, whose cores the
    slots use, can run; a head started with no CPUs stays free), in turn from ``offset``.

    Args:
        nodes: ``ray.nodes()``.
        num_slots: number of slots N.
        offset: where the turn starts, so that the slot 0 of every table is not on one node.

    Returns:
        N node ids, the slots in order.
    """
    alive = [n for n in nodes if n.get("Alive")]
    working = [n for n in alive if n.get("Resources", {}).get("CPU", 0) > 0]
    pool = sorted(n["NodeID"] for n in working or alive)
    if not pool:
        raise RuntimeSetupError(
            "Ray lists no alive node to start the assigner slots on; "
            "check that the Ray cluster is up (ray status)"
        )
    return [pool[(offset + i) % len(pool)] for i in range(num_slots)]
