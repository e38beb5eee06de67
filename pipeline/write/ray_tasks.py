"""Work beside the caller as Ray tasks over the cluster (``base/beside.py``'s contract)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dynbucket.base.beside import Beside, Running


class _Task:
    """A Ray task's handle as ``Running``."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def done(self) -> bool:
        import ray

        return bool(ray.wait([self.ref], timeout=0)[0])

    def result(self) -> Any:
        import ray

        return ray.get(self.ref)


class RayTasks(Beside):
    """Ray tasks (the driver's Ray must be connected). No CPU reserved: Spark's executors
    and the slot actors may hold every CPU the cluster has, and a task waiting for one
    would never run (a close waiting for it would wait forever)."""

    def __init__(self, max_retries: int = 0) -> None:
        self.max_retries = max_retries

    def submit(self, fn: Callable[..., Any], *args: Any) -> Running:
        import ray

        task = ray.remote(num_cpus=0, max_retries=self.max_retries)(fn)
        return _Task(task.remote(*args))

    def cpus(self) -> int:
        import ray

        return int(ray.cluster_resources().get("CPU", 1))

    def each_done(self, running: Sequence[Running]) -> Iterator[int]:
        import ray

        index = {r.ref: i for i, r in enumerate(running)}  # type: ignore[attr-defined]
        left = list(index)
        while left:
            ready, left = ray.wait(left, num_returns=1)
            yield index[ready[0]]
