"""Apache Hudi's on-disk spellings (table version 6, timeline layout 1), as pure functions.

What a Hudi reader needs to find in the files: ``hoodie.properties`` and other Java
properties files (``properties``), Avro schemas and Avro binary data (``avro``), the five
``_hoodie_*`` meta fields (``meta_fields``), file names and log files with their blocks
(``files``, ``log_file``), and the commit metadata JSON (``commit``). The table layer around
(``format/``) decides what to write; this package only spells it. ``docs/hudi-format.md``
describes the result.
"""
