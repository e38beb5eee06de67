"""Java properties files as Hudi reads and writes them."""

from __future__ import annotations

from dynbucket.format.hudi.properties import dumps, loads


def test_round_trip_with_characters_java_escapes() -> None:
    props = {
        "hoodie.table.create.schema": '{"type":"record","name":"t"}',
        "k e=y:": " v=a:l#",
        "unicode": "é€😀",
        "empty": "",
    }
    data = dumps(props, "saved")
    assert loads(data) == props
    assert b'hoodie.table.create.schema={"type"\\:"record","name"\\:"t"}' in data
    assert data.startswith(b"#saved\n#")


def test_reads_what_java_writes() -> None:
    java = (
        b"#Properties saved on 2025-03-31\n! a comment\nhoodie.table.name = trips\n"
        b"hoodie.table.type:MERGE_ON_READ\nlong.value=a\\\n    b\nescaped=\\u00e9\\t\n"
    )
    assert loads(java) == {
        "hoodie.table.name": "trips",
        "hoodie.table.type": "MERGE_ON_READ",
        "long.value": "ab",
        "escaped": "é\t",
    }
