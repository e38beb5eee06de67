"""The assigner core of one slot: plain Python, no Ray (the actor in ``actor.py`` wraps it).

Per data partition it keeps a :class:`PartitionIndex`, bootstrapped lazily from the
record-level index through an :class:`IndexSource` on first touch, and evicted by the
proposal's checkpoint flow. Checkpoint ids are the table's instant ids, as integers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from dynbucket.actors.allocator import ALONE, BucketAllocator, Lane
from dynbucket.actors.cache import MISSING, to_cache_keys
from dynbucket.actors.partition_index import PartitionCatchUp, PartitionIndex, PartitionLoad
from dynbucket.base.errors import AssignerError, AssignerRestartedError, ConfigError
from dynbucket.base.keyhash import slot_of
from dynbucket.base.options import DynamicBucketIndex

#: Checkpoint id meaning "none yet".
NO_CHECKPOINT = -1

#: Every slot's new keys of one committed checkpoint: partition -> bucket -> keys.
NewKeys = Mapping[str, Mapping[int, int]]


class Moves(NamedTuple):
    """Where a global index's rows go, which may be another partition than the record
    names (``global_assigner.py``): partition names, and per row the position of its
    partition among them (-1: the record's own), and the partition position and bucket
    its key moves out of (-1: no move)."""

    names: list[str]
    where: npt.NDArray[np.int32]
    from_partition: npt.NDArray[np.int32]
    from_bucket: npt.NDArray[np.int32]


class Answer(NamedTuple):
    """A slot's answer for a batch's rows (:meth:`BucketAssigner.place` and
    :meth:`BucketAssigner.find`): the buckets and whether each key is new, and ``moves``
    where the slot routes rows across partitions (a global index; None: each row stays in
    the partition its record names)."""

    buckets: npt.NDArray[np.int32]
    is_new: npt.NDArray[np.bool_]
    moves: Moves | None = None


class IndexSource(Protocol):
    """Reads what the assigner needs from the record-level index and file listing."""

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        """Per partition of ``partitions``, this slot's entries (hash routes to ``slot``),
        plus every slot's key count per bucket (and bytes per bucket, when fullness is in
        bytes). One call for the partitions a batch touches first: the committed state is
        read once (a listing of the timeline each, on S3 a request each, otherwise)."""
        ...

    def bucket_bytes(self, partition: str) -> npt.NDArray[np.int64]:
        """Bytes of each bucket's file group in ``partition`` (latest base + deltas)."""
        ...

    def partitions(self) -> list[str]:
        """Every partition with committed index entries (a global index loads them all)."""
        ...

    def catch_up(
        self, seen: Mapping[str, AbstractSet[str]], slot: int, num_slots: int
    ) -> dict[str, PartitionCatchUp | None]:
        """Per partition of ``seen`` (partition -> the index files its cache holds), what
        the committed index files it misses say for ``slot`` (None: they cannot be told
        apart, an index compaction or a rescale restated them: the cache loads again).
        One call for all partitions: the committed state is read once."""
        ...


class EmptySource:
    """The index of a table with no committed keys yet (every partition starts empty)."""

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        return {p: PartitionLoad.empty() for p in partitions}

    def bucket_bytes(self, partition: str) -> npt.NDArray[np.int64]:
        return np.zeros(0, np.int64)

    def partitions(self) -> list[str]:
        return []

    def catch_up(
        self, seen: Mapping[str, AbstractSet[str]], slot: int, num_slots: int
    ) -> dict[str, PartitionCatchUp | None]:
        return dict.fromkeys(seen)


@dataclass
class AssignerStats:
    """Counters of one slot (``stats()`` of the actor)."""

    slot: int
    num_slots: int
    cached_partitions: int = 0
    cached_keys: int = 0
    cached_bytes: int = 0
    bootstraps: int = 0
    bootstrap_seconds: float = 0.0
    bootstrap_entries_scanned: int = 0
    catch_ups: int = 0
    catch_up_seconds: float = 0.0
    evictions: int = 0
    buckets_created: int = 0
    overflow_keys: int = 0
    keys_assigned: int = 0
    new_keys: int = 0
    aborted_keys: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


class BucketAssigner:
    """Assigns buckets to the keys routed to one slot.

    Lifecycle per instant (checkpoint) ``c``: ``begin(c, s)``, any number of
    ``assign(c, ...)``, then ``snapshot(c, s', new_keys)`` once the instant committed
    (``s' = c``) or ``abort(c)`` when it will never commit. ``s`` is the latest successful
    checkpoint; ``new_keys`` are every slot's new keys of ``c`` per partition and bucket,
    which keep the committed counts, by which the slots split each bucket's room, the same
    in every slot (``allocator.py``).
    """

    global_index = False
    """Whether keys are unique in the table (``dynamic-bucket.global-index``), else in
    their partition: the options a core is given must say the same."""

    def __init__(
        self,
        slot: int,
        num_slots: int,
        options: DynamicBucketIndex,
        source: IndexSource,
    ) -> None:
        if options.global_index != self.global_index:
            raise ConfigError(
                f"dynamic-bucket.global-index={str(options.global_index).lower()} given to "
                f"{type(self).__name__}, whose keys are unique "
                f"{'in the table' if self.global_index else 'in their partition'}; make the "
                "slots with the core the table's bucket scheme names (write/schemes.SIDES)"
            )
        self.allocator = BucketAllocator(slot, num_slots, options)
        self.slot = slot
        self.num_slots = num_slots
        self.options = options
        self.source = source
        self.partitions: dict[str, PartitionIndex] = {}
        self.checkpoint = NO_CHECKPOINT
        self.counted = NO_CHECKPOINT
        """The latest successful checkpoint whose keys of every slot the counts hold."""
        self._stats = AssignerStats(slot, num_slots)

    # --- checkpoint flow -----------------------------------------------------------------

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None:
        """Opens ``checkpoint``, whose new keys go to the buckets of ``lanes`` (its writer's
        lane ``L`` of ``W``: ids ``L`` modulo ``W``; ``allocator.py``). Mappings of
        checkpoints <= ``latest_successful`` move to the committed run (their snapshot may
        never have come); younger ones stay pending until a snapshot commits them or
        ``abort`` drops them.

        When ``latest_successful`` is not the checkpoint the counts last took every slot's
        keys of (its snapshot never came, or came without them), another slot may have
        filled buckets this one does not know of: with more than one slot, the partitions
        with nothing pending are dropped and bootstrap again from the index footers."""
        if checkpoint < self.checkpoint:
            raise AssignerError(
                f"begin({checkpoint}) after checkpoint {self.checkpoint}: checkpoint ids must "
                "increase (is a second writer using this table?)"
            )
        self._settle(latest_successful)
        if latest_successful != self.counted and self.num_slots > 1:
            self._drop_uncounted()
        self.counted = latest_successful
        if self.options.by_bytes:
            for name, index in self.partitions.items():
                index.set_listing(self.source.bucket_bytes(name))
        self.allocator.lanes = lanes
        self.checkpoint = checkpoint

    def assign(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        """Buckets for a batch of keys routed to this slot.

        Args:
            checkpoint: the open checkpoint (from ``begin``).
            partitions: the distinct partition paths of the batch.
            partition_codes: per row, the position of its partition in ``partitions``.
            hashes: per row, the 64-bit key hash.

        Returns:
            Per row, the bucket id and whether the key is new (not committed yet), in input
            order. A key seen twice (also across retried calls) gets the same bucket.

        Raises:
            AssignerRestartedError: ``checkpoint`` was not begun here (the actor restarted
                and lost this instant's mappings); the instant must be retried.
        """
        self._check_open(checkpoint)
        hashes = self._routed(hashes)
        buckets = np.empty(len(hashes), np.int32)
        is_new = np.empty(len(hashes), np.bool_)
        groups = rows_by_partition(partitions, partition_codes)
        self._bootstrap([name for name, _ in groups if name not in self.partitions])
        for name, rows in groups:
            buckets[rows], is_new[rows] = self._assign_partition(
                checkpoint, name, to_cache_keys(hashes[rows])
            )
        self._stats.keys_assigned += len(hashes)
        return buckets, is_new

    def place(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
        ops: npt.NDArray[np.int8] | None = None,
    ) -> Answer:
        """:meth:`assign` as one answer, what the actor shell returns for a batch.
        ``ops`` (per row, ``_op``): a slot that places deletes where their keys are reads
        them; this one finds a delete's key with :meth:`locate` instead."""
        return Answer(*self.assign(checkpoint, partitions, partition_codes, hashes))

    def find(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> Answer:
        """:meth:`locate` as one answer (no key is new)."""
        buckets = self.locate(checkpoint, partitions, partition_codes, hashes)
        return Answer(buckets, np.zeros(len(buckets), np.bool_))

    def locate(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int32]:
        """Bucket of each key to delete in ``checkpoint``, or ``MISSING`` (-1) for keys the
        table does not know; assigns nothing. The keys found leave the cache, and their
        room is free, when the checkpoint commits (``snapshot``); an abort keeps them.

        Raises:
            AssignerRestartedError: ``checkpoint`` was not begun here (as ``assign``).
        """
        self._check_open(checkpoint)
        hashes = self._routed(hashes)
        buckets = np.full(len(hashes), MISSING, np.int32)
        groups = rows_by_partition(partitions, partition_codes)
        self._bootstrap([name for name, _ in groups if name not in self.partitions])
        for name, rows in groups:
            index = self._index(name)
            index.last_used_checkpoint = checkpoint
            keys = to_cache_keys(hashes[rows])
            buckets[rows] = index.lookup(keys)[0]
            index.delete_at_commit(checkpoint, keys[buckets[rows] >= 0])
        return buckets

    def leave(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> None:
        """Notes keys ``checkpoint`` takes out of their partitions (records marked as
        deletes: deleted, or taken as new and never written): ``locate``'s bookkeeping."""
        self.locate(checkpoint, partitions, partition_codes, hashes)

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[str]:
        """The proposal's snapshot(): commit, update flags, evict. Returns evicted partitions.

        1. Each partition commits and updates its flags; the flags name the evictable ones
           (not given new keys since the latest successful checkpoint, nothing pending).
           ``new_keys``, every slot's new keys of the committed ``checkpoint`` per partition
           and bucket, go into the committed counts (without them, the next ``begin`` with
           more than one slot drops what is cached).
        2. Without ``cache_max_bytes`` every evictable partition is evicted (the proposal).
        3. With it, evictable partitions stay while the slot's whole cache fits the budget,
           the least recently used evicted first; a partition the flags keep is never
           evicted here, whatever the budget.
        """
        counted = new_keys is not None and checkpoint <= latest_successful
        evictable = [  # 1.
            name
            for name, index in self.partitions.items()
            if index.snapshot(
                checkpoint, latest_successful, (new_keys or {}).get(name, {}) if counted else None
            )
        ]
        if counted:
            self.counted = checkpoint
        if checkpoint <= latest_successful:
            whole = counted or self.num_slots == 1
            for index in self.partitions.values():
                index.saw(checkpoint, whole)
        budget = self.options.cache_max_bytes
        if budget is not None and evictable:  # 3.
            evictable.sort(key=lambda n: (self.partitions[n].last_used_checkpoint, n))
            cached = sum(index.nbytes for index in self.partitions.values())
            over = 0
            while over < len(evictable) and cached > budget:
                cached -= self.partitions[evictable[over]].nbytes
                over += 1
            evictable = evictable[:over]
        for name in evictable:  # 2.
            self.evict(name)
        return evictable

    def abort(self, checkpoint: int) -> int:
        """Drops every mapping ``checkpoint`` created (I8); returns how many."""
        dropped = sum(index.abort(checkpoint) for index in self.partitions.values())
        self._stats.aborted_keys += dropped
        return dropped

    def evict(self, partition: str) -> None:
        """Drops a partition's cache; its next touch bootstraps it again."""
        index = self.partitions.pop(partition, None)
        if index is not None:
            if index.uncommitted:
                raise AssignerError(
                    f"cannot evict partition {partition!r}: it holds uncommitted mappings or "
                    f"deletes of checkpoints {index.uncommitted}"
                )
            self._stats.evictions += 1

    def reset(self) -> int:
        """Drops every partition's cache, as after a restart but keeping the process: another
        writer committed, so any of them may miss keys. Each bootstraps again at its next
        touch. Returns how many partitions were dropped.

        Raises:
            AssignerError: a partition holds uncommitted mappings (abort them first).
        """
        names = list(self.partitions)
        for name in names:
            self.evict(name)
        return len(names)

    def catch_up(self, latest_successful: int) -> int:
        """Brings every cached partition up to the index as committed now, after another
        writer committed (instead of ``reset``): each reads only the index files it misses
        (``IndexSource.catch_up``: the keys they insert and delete of this slot, every
        slot's counts), or, when those cannot be told apart, is dropped and loads again at
        its next touch. The counts then hold every slot's keys as of ``latest_successful``
        (the next ``begin``'s). Returns how many partitions were dropped.

        Raises:
            AssignerError: a partition holds uncommitted mappings (abort them first).
        """
        start = time.perf_counter()
        dropped = 0
        known = {
            name: index.seen
            for name, index in self.partitions.items()
            if index.seen is not None and not index.uncommitted
        }
        caught = self.source.catch_up(known, self.slot, self.num_slots) if known else {}
        for name, index in list(self.partitions.items()):
            found = caught.get(name)
            if found is None:
                self.evict(name)  # refuses a partition with uncommitted mappings
                dropped += 1
            else:
                index.catch_up(found)
        self.counted = latest_successful
        self._stats.catch_ups += 1
        self._stats.catch_up_seconds += time.perf_counter() - start
        return dropped

    # --- introspection -------------------------------------------------------------------

    def stats(self) -> AssignerStats:
        s = self._stats
        s.cached_partitions = len(self.partitions)
        s.cached_keys = sum(len(i) for i in self.partitions.values())
        s.cached_bytes = sum(i.nbytes for i in self.partitions.values())
        s.buckets_created = self.allocator.buckets_created
        s.overflow_keys = self.allocator.overflow_keys
        return s

    # --- internals -----------------------------------------------------------------------

    def _settle(self, latest_successful: int) -> None:
        """``begin``'s step: checkpoints <= ``latest_successful`` are committed."""
        for index in self.partitions.values():
            if index.commit_through(latest_successful):
                index.seen = None  # committed without a snapshot: the counts may miss keys

    def _drop_uncounted(self) -> None:
        """``begin``'s step when the counts may miss another slot's keys: the partitions
        with nothing pending go (each bootstraps again at its next touch)."""
        for name in [n for n, index in self.partitions.items() if not index.uncommitted]:
            self.evict(name)

    def _assign_partition(
        self, checkpoint: int, name: str, keys: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        """1. bootstrap on first touch; 2. look up the committed runs (and older checkpoints);
        3. the rest: keys this checkpoint mapped keep their bucket, the distinct others get
        buckets from the allocator, in one pass over this checkpoint's table."""
        index = self._index(name)
        index.last_used_checkpoint = checkpoint
        buckets, is_new = index.lookup(keys, skip=checkpoint)
        missing = buckets < 0
        if missing.any():
            buckets[missing], fresh = index.assign_new(
                checkpoint, keys[missing], lambda n: self.allocator.allocate(index, n)
            )
            is_new[missing] = True
            self._stats.new_keys += fresh
        return buckets, is_new

    def _check_open(self, checkpoint: int) -> None:
        if checkpoint != self.checkpoint:
            raise AssignerRestartedError(
                f"slot {self.slot}: a call for checkpoint {checkpoint} but the open checkpoint "
                f"is {self.checkpoint}; the assigner restarted (or the call is stale), so the "
                "instant must be aborted and retried"
            )

    def _routed(self, hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        hashes = np.ascontiguousarray(hashes, dtype=np.int64)
        if self.num_slots == 1:
            return hashes
        misrouted = slot_of(hashes, self.num_slots) != self.slot
        if misrouted.any():
            h = int(hashes[np.argmax(misrouted)])
            raise AssignerError(
                f"key hash {h} routes to slot {int(slot_of(np.array([h]), self.num_slots)[0])}"
                f" of {self.num_slots}, not to slot {self.slot}: rows must be routed by "
                "pmod(hash, slots)"
            )
        return hashes

    def _index(self, name: str) -> PartitionIndex:
        """The partition's cache, bootstrapped on first touch (an empty cache is falsy)."""
        index = self.partitions.get(name)
        if index is None:
            self._bootstrap([name])
            index = self.partitions[name]
        return index

    def _bootstrap(self, names: Sequence[str]) -> None:
        """The caches of ``names`` from the index, in one read of the committed state."""
        if not names:
            return
        start = time.perf_counter()
        loads = self.source.loads(names, self.slot, self.num_slots)
        for name in names:
            load = loads.pop(name)
            self.partitions[name] = PartitionIndex(load)
            self._stats.bootstraps += 1
            self._stats.bootstrap_entries_scanned += load.entries_scanned
        self._stats.bootstrap_seconds += time.perf_counter() - start


def rows_by_partition(
    partitions: Sequence[str], partition_codes: npt.NDArray[np.integer]
) -> list[tuple[str, npt.NDArray[np.intp]]]:
    """(partition, its row positions) for each partition of a batch that has rows."""
    if len(partitions) == 1:
        return [(partitions[0], np.arange(len(partition_codes)))]
    # As 16-bit integers (a batch holds few partitions) one radix sort orders the rows.
    codes = partition_codes.astype(np.uint16) if len(partitions) <= 1 << 16 else partition_codes
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(partitions) + 1))
    return [
        (name, order[bounds[p] : bounds[p + 1]])
        for p, name in enumerate(partitions)
        if bounds[p + 1] > bounds[p]
    ]
