"""The table services by timeline action: the one list the runner, the due services and
the CLI look a service up in (a new service is a line here)."""

from __future__ import annotations

from dynbucket.format.services.clean import Clean
from dynbucket.format.services.compaction import Compaction
from dynbucket.format.services.index_compaction import IndexCompaction
from dynbucket.format.services.log_compaction import LogCompaction
from dynbucket.format.services.metadata_compaction import MetadataCompaction
from dynbucket.format.services.service import Service

#: The services that run as instants of their own, in the order they run after a write:
#: compaction and log compaction first (they make the slices and logs a clean may drop),
#: then cleaning, then index compaction, then the metadata table's compaction.
SERVICES: dict[str, Service] = {
    s.action: s
    for s in (Compaction(), LogCompaction(), Clean(), IndexCompaction(), MetadataCompaction())
}


def service(action: str) -> Service:
    """The service of a timeline ``action``."""
    return SERVICES[action]
