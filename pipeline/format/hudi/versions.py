"""Which Hudi tables this dynbucket reads and writes: the table version gate.

dynbucket creates tables in Hudi table version 6 with timeline layout 1
(``.hoodie/<instant>.<action>``). Hudi 1.0 writes version 8 and Hudi 1.1 version 9, both
with timeline layout 2 (the active timeline under ``.hoodie/timeline/``, completion times
in instant file names, Avro metadata), and a Hudi 1.x writer upgrades a table it writes
to its own version (``hoodie.write.auto.upgrade``, on by default); an adopted table, or
one of ours a Hudi 1.x writer upgraded, is read and written in its own version (6, 8 or
9). A layout-2 timeline looked for where layout 1 keeps it is an empty timeline: a table
that reads as 0 rows with no error. So a table is read only in a version and layout this
code knows (and a layout-1 table with a layout-2 timeline folder not at all); any other is
refused, by name, before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Mapping

TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT = "hoodie.timeline.layout.version"
#: The table version and timeline layout dynbucket writes (``hoodie.properties``).
WRITTEN_VERSION = "6"
WRITTEN_LAYOUT = "1"
#: (table version, timeline layout) this dynbucket reads and writes: the one it creates
#: tables in, and those of Hudi 1.x, which adopted tables keep.
SUPPORTED = frozenset({(WRITTEN_VERSION, WRITTEN_LAYOUT), ("8", "2"), ("9", "2")})
#: Where timeline layout 2 (table versions 8 and later) keeps the active timeline,
#: relative to the table's root (``hoodie.timeline.path``, Hudi's default).
LAYOUT_2_TIMELINE = ".hoodie/timeline"


def describe(hoodie: Mapping[str, str]) -> str:
    """A table's Hudi version, timeline layout and type, as messages name them."""
    version = hoodie.get(TABLE_VERSION, "(none)")
    layout = hoodie.get(TIMELINE_LAYOUT, "(none)")
    kind = hoodie.get("hoodie.table.type", "COPY_ON_WRITE")
    return f"Hudi table version {version}, timeline layout {layout}, {kind}"


def unsupported(hoodie: Mapping[str, str], layout_2_timeline: bool) -> str | None:
    """Why a table of these ``hoodie.properties`` cannot be read here (None: it can);
    ``layout_2_timeline``: a ``.hoodie/timeline/`` folder is there (a table written by Hudi
    1.x, whatever its properties say)."""
    found = (hoodie.get(TABLE_VERSION), hoodie.get(TIMELINE_LAYOUT))
    if found not in SUPPORTED:
        return describe(hoodie)
    if found[1] == "1" and layout_2_timeline:
        return f"{describe(hoodie)}, but with a timeline of layout 2 ({LAYOUT_2_TIMELINE}/)"
    return None


def upgraded_message(where: str, reason: str) -> str:
    """The refusal of a dynbucket table that a Hudi 1.x writer upgraded."""
    return (
        f"{where}: {reason}; this dynbucket reads and writes Hudi table version 6 with "
        "timeline layout 1, and versions 8 and 9 with timeline layout 2. Nothing was read "
        "or written. Bring the table to one of those with Hudi (Spark SQL: CALL "
        "upgrade_table or downgrade_table), its properties and timeline agreeing"
    )
