"""Adoption on a cluster: the index build's shares of slices (``format/table/adopt_index.py``)
as Ray tasks, so that a large table's index is built by every node, not read through the
driver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa


def on_ray(fn: Callable[..., pa.Table], calls: list[tuple[Any, ...]]) -> list[pa.Table]:
    """A ``Spread`` over Ray tasks (the driver's Ray must be connected). No CPU reserved,
    as for the table services: Spark's executors may hold them all."""
    import ray

    task = ray.remote(num_cpus=0, max_retries=1)(fn)
    return list(ray.get([task.remote(*args) for args in calls]))
