"""Reaching the assigner actors from Spark's Python workers.

Spark's Python workers are plain processes forked by the executor JVM, not Ray workers; the
first call in a worker joins the Ray cluster as a client driver (Spark reuses Python
workers, so this happens once per worker, not per task).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RayLink:
    """Where the actors live: picklable, shipped to Spark tasks inside their closures."""

    address: str
    """GCS address of the Ray cluster."""
    namespace: str
    """Ray namespace of the actors."""

    def actor(self, name: str) -> Any:
        """Handle of the named actor, joining Ray first if this process has not."""
        handle = _handles.get((self.address, self.namespace, name))
        if handle is None:
            self.connect()
            import ray

            handle = ray.get_actor(name, namespace=self.namespace)
            _handles[(self.address, self.namespace, name)] = handle
        return handle

    def connect(self) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(
                address=self.address,
                namespace=self.namespace,
                logging_level=logging.ERROR,
                log_to_driver=False,
            )


_handles: dict[tuple[str, str, str], Any] = {}
