"""Where things live in a table's folder (docs/hudi-format.md draws the tree).

Hudi's own files are under ``.hoodie/``; everything that is dynbucket's alone (its
definition, the record-level index, the writer lease, its own timeline records) is under
``.hoodie/.dynbucket/``, which Hudi readers skip. Partitions are the other folders.
"""

HOODIE_DIR = ".hoodie"
PROPERTIES_FILE = f"{HOODIE_DIR}/hoodie.properties"
META_DIR = f"{HOODIE_DIR}/.dynbucket"
TABLE_FILE = f"{META_DIR}/table.json"
TIMELINE_DIR = f"{META_DIR}/timeline"
RLI_DIR = f"{META_DIR}/rli"
#: Each instant's decided outcome (committed or rolled back): ``outcome.py``.
OUTCOME_DIR = f"{META_DIR}/outcomes"
#: Where the first, unreleased layout kept its metadata (at the table's root).
OLD_LAYOUT_DIR = ".dynbucket"
#: Bucket layouts of the stateless schemes: ``<instant>.json`` per instant that changed one.
BUCKET_LAYOUT_DIR = f"{META_DIR}/buckets"
#: Schema changes: ``<instant>.json`` per instant that evolved the schema (``schemas.py``).
SCHEMA_DIR = f"{META_DIR}/schemas"
#: What archival moved off the active timeline: ``<floor>.json`` per archival
#: (``timeline/archive.py``).
ARCHIVE_DIR = f"{META_DIR}/archive"
#: What adoption recorded of the files Apache Hudi wrote (``file_group/adopted.py``).
ADOPTED_FILE = f"{META_DIR}/adopted.json"
