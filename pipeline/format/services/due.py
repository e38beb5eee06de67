"""What a write leaves due: the table services that keep a streaming table's cost flat.

A table that takes a micro-batch every few seconds grows a log file per touched group, an
index file per touched partition and three timeline files per write. Left alone, every
write and read gets slower with each of them (docs/soak.md). As Hudi's writers do, the
services a write made due run right after it (``runner.py``; a due compaction may
run beside the writes), each service deciding from what the write wrote and one listing of
the timeline (``Service.due``):

* **compaction** of file slices with ``hoodie.compact.inline.max.delta.commits`` log
  files (merge-on-read tables): into a new base file once the logs reach
  ``compaction.log-size-ratio`` of it, else a log compaction merging them
  (``compaction.py``, ``log_compaction.py``);
* **cleaning** once ``hoodie.clean.max.commits`` data commits followed the last clean;
* **index compaction** of the partitions it wrote index files to, once one has
  ``index.compaction.min-files`` of them;
* **archival** once the active timeline holds more than ``hoodie.keep.max.commits``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dynbucket.format.services.registry import SERVICES
from dynbucket.format.services.service import Scope, ServiceResult, run_now
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline import archive
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.plans import unattended
from dynbucket.format.timeline.timeline import Instant, Timeline, seconds_since
from dynbucket.format.timeline.transaction import WrittenFile


@dataclass(frozen=True)
class Upkeep:
    """The services a write made due."""

    services: Mapping[str, Scope] = field(default_factory=dict)
    """The due services that run as instants of their own, by action in the registry's
    order, each with the scope it plans for (each service decides: ``Service.due``)."""
    archive: bool = False
    left: tuple[str, ...] = ()
    """Actions of services pending for longer than a lease (their executor died, most
    likely): each is executed again, due or not (one left behind would otherwise hold
    archival back for as long as no new one of its action is due)."""

    def scopes(self) -> dict[str, Scope]:
        return dict(self.services)

    @property
    def index_partitions(self) -> tuple[str, ...]:
        """The partitions a due index compaction looks at."""
        scope = self.services.get(Action.INDEX_COMPACTION)
        return scope.partitions or () if scope is not None else ()

    def __bool__(self) -> bool:
        return bool(self.services) or self.archive or bool(self.left)


def due(spec: TableSpec, files: Sequence[WrittenFile], timeline: Timeline) -> Upkeep:
    """The services due after a write that wrote ``files`` (``timeline``: the table's):
    each automatic service of the registry says whether it is, archival last."""
    o = spec.options
    instants = timeline.instants()
    services = {
        action: scope
        for action, service in SERVICES.items()
        if service.automatic(spec) and (scope := service.due(spec, files, instants)) is not None
    }
    archivable = o.archive_automatic and _archivable(
        instants, o.keep_min_commits, o.keep_max_commits
    )
    return Upkeep(services, archivable, _left(spec, instants))


def _left(spec: TableSpec, instants: Sequence[Instant]) -> tuple[str, ...]:
    """Actions of automatic services with an instant pending for longer than a lease:
    its executor died (one of this process that still runs it is not run twice:
    ``runner.py`` skips the actions it runs). A service switched off is not run."""
    o = spec.options
    old = (
        i.action
        for i in instants
        if not i.completed
        and i.action in SERVICES
        and SERVICES[i.action].automatic(spec)
        and seconds_since(i.id) > o.lock_lease_seconds
    )
    return tuple(sorted(set(old)))


def _archivable(instants: Sequence[Instant], keep_min: int, keep_max: int) -> bool:
    """Whether an archival would archive an instant: more than ``keep_max`` active, and a
    completed one beyond the ``keep_min`` newest before the earliest pending (a pending
    instant holds archival back; while a compaction runs, archival need not be tried
    after every write)."""
    if len(instants) <= keep_max:
        return False
    pending = min((i.id for i in instants if not i.completed), default=None)
    oldest = instants[0]
    return (
        oldest.completed
        and (pending is None or oldest.id < pending)
        and (sum(i.completed for i in instants) > keep_min)
    )


def run_left(store: TableStore, spec: TableSpec, actions: Sequence[str]) -> list[ServiceResult]:
    """Executes and completes the services of ``actions`` left pending by an executor that
    died (``plans.unattended``), oldest first."""
    if not actions:
        return []
    timeline = Timeline(store, spec.options.merge_on_read)
    return [SERVICES[i.action].run(store, spec, i.id) for i in unattended(timeline, *actions)]


def target_io_bytes(spec: TableSpec) -> int:
    """Bytes of file slices one automatic compaction reads at most."""
    return spec.options.compaction_target_io_mb * 1024 * 1024


def beside(spec: TableSpec) -> bool:
    """Whether due compactions (of slices and of the index) and cleans run beside the
    writes."""
    return spec.options.compaction_async and not spec.options.compaction_inline


def run_inline(store: TableStore, spec: TableSpec, upkeep: Upkeep) -> list[ServiceResult]:
    """Runs the due services that run inline (archival; the others unless they run beside
    the writes: ``beside``), each as its own instant, in the registry's order (compaction
    and log compaction first: they make the slices and logs the clean may drop; then
    cleaning, index compaction), archival last (it archives what the others completed)."""
    o = spec.options
    out = []
    if not beside(spec):
        out += run_left(store, spec, upkeep.left)
        for action, scope in upkeep.scopes().items():
            out.append(run_now(SERVICES[action], store, spec, scope))
    if upkeep.archive:
        done = archive.archive(
            store, o.merge_on_read, o.keep_min_commits, o.keep_max_commits, *o.lease()
        )
        out.append(ServiceResult("archive", done.floor or None, done.archived))
    return [r for r in out if r.instant is not None]
