"""Hudi's metadata table (``.hoodie/metadata``): a merge-on-read Hudi table of its own,
partitioned by what it indexes (``files``, ``record_index``, ...), with HFile base files and
HFile log blocks (``format/hudi/hfile.py``), whose records are ``HoodieMetadataRecord``
(``records.py``)."""
