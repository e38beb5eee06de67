"""Real assigner actors: a killed slot comes back, re-bootstraps from the RLI, keeps buckets."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base import columns
from dynbucket.base.errors import AssignerRestartedError
from dynbucket.base.keyhash import slot_of
from dynbucket.format.table.context import TableRef
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write.index_source import RLIIndexSource

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _assign(fleet: AssignerFleet, checkpoint: int, rows: pa.Table) -> dict[tuple[str, int], int]:
    import ray

    hashes = rows.column("_hash").to_numpy()
    slots = slot_of(hashes, fleet.num_slots)
    out = {}
    for s, handle in enumerate(fleet.handles):
        part = rows.filter(pa.array(slots == s)).select([columns.PARTITION, columns.HASH])
        tagged = ray.get(handle.assign.remote(checkpoint, part))
        assert not any(tagged.column(columns.IS_NEW).to_pylist())
        for p, h, b in zip(
            tagged.column(0).to_pylist(),
            tagged.column(1).to_pylist(),
            tagged.column(columns.BUCKET).to_pylist(),
            strict=True,
        ):
            out[(p, h)] = b
    return out


def test_killed_slot_actor_comes_back_and_keeps_every_bucket(
    runtime: Runtime, tmp_path: Path
) -> None:
    import ray

    table = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", index=DynamicBucketIndex(max_keys_per_bucket=40)
    )
    n = 400
    table.upsert(
        pa.table(
            {
                "id": [f"k{i}" for i in range(n)],
                "day": [f"d{i % 3}" for i in range(n)],
                "v": list(range(n)),
            },
            schema=SCHEMA,
        )
    )
    from dynbucket.base.keyhash import hash_columns

    live = table.to_arrow()
    committed = {
        (p, int(h)): b
        for p, h, b in zip(
            live.column("_partition").to_pylist(),
            hash_columns([live.column("id")]).tolist(),
            live.column("_bucket").to_pylist(),
            strict=True,
        )
    }
    assert len(set(committed.values())) > 3  # several buckets per partition
    rows = pa.table(
        {
            "_partition": live.column("_partition"),
            "_hash": pa.array(hash_columns([live.column("id")])),
        }
    )

    link = RayLink(runtime.ray_address, runtime.config.namespace)
    source = functools.partial(RLIIndexSource, TableRef.of(table._store, table._spec))
    fleet = AssignerFleet(link, "restart-test", 2, table._spec.bucket_options, source)
    try:
        latest = int(table.latest_instant() or -1)
        fleet.begin(latest + 1, latest)
        assert _assign(fleet, latest + 1, rows) == committed
        assert fleet.stats()[0]["bootstraps"] == 3  # three partitions, loaded lazily

        assert fleet.stats()[0]["keys_assigned"] > 0
        ray.kill(fleet.handles[0], no_restart=False)  # a crash: Ray restarts the actor
        deadline = time.monotonic() + 60
        while True:
            try:  # a restarted actor has assigned nothing yet
                if ray.get(fleet.handles[0].stats.remote(), timeout=10)["keys_assigned"] == 0:
                    break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
            assert time.monotonic() < deadline, "the actor did not come back"
            time.sleep(0.5)
        assert fleet.stats()[0]["bootstraps"] == 0  # it came back empty

        # It lost the open instant's state: it refuses to assign for it.
        part = rows.filter(pa.array(slot_of(rows.column("_hash").to_numpy(), 2) == 0))
        with pytest.raises(AssignerRestartedError):
            ray.get(fleet.handles[0].assign.remote(latest + 1, part))

        # The driver opens the next instant: the slot re-bootstraps from the RLI.
        fleet.begin(latest + 2, latest)
        assert _assign(fleet, latest + 2, rows) == committed
        stats = fleet.stats()[0]
        assert stats["bootstraps"] == 3
        assert stats["cached_keys"] == int(np.sum(slot_of(rows.column("_hash").to_numpy(), 2) == 0))
    finally:
        fleet.close()
