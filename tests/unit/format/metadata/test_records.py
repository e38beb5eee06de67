"""``HoodieMetadataRecord`` as Hudi writes it: the schema equals the one in Hudi's own
HFiles, and the records we encode are byte for byte the ones Hudi wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.hfile import HFile
from dynbucket.format.metadata import records
from dynbucket.format.metadata.records import Location
from tests.hudi_tables import unzipped


def _without_docs(t: Any) -> Any:
    if isinstance(t, list):
        return [_without_docs(x) for x in t]
    if isinstance(t, dict):
        return {k: _without_docs(v) for k, v in t.items() if k != "doc"}
    return t


@pytest.fixture(scope="module")
def hudi_mdt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = unzipped("sample_table/mor/avro/v9_txns_simple_meta", tmp_path_factory.mktemp("t"))
    return root / ".hoodie" / "metadata"


def test_the_schema_is_hudis(hudi_mdt: Path) -> None:
    (base,) = sorted((hudi_mdt / "files").glob("*.hfile"))[-1:]
    theirs = HFile.read(base.read_bytes()).schema
    assert theirs is not None
    assert _without_docs(json.loads(theirs)) == records.schema()


def test_files_records_are_the_bytes_hudi_wrote(hudi_mdt: Path) -> None:
    compared = 0
    for log in sorted((hudi_mdt / "files").glob(".files-*.log.*")):
        for block in log_file.read_blocks(log.read_bytes()):
            if block.type != log_file.HFILE_DATA:
                continue
            schema = block.header[log_file.SCHEMA]
            for key, value in HFile.read(bytes(block.content)).items():
                record = records.decode(value, schema)
                files = record["filesystemMetadata"]
                added = {n: i["size"] for n, i in files.items() if not i["isDeleted"]}
                deleted = [n for n, i in files.items() if i["isDeleted"]]
                if key == records.ALL_PARTITIONS_KEY.encode():
                    ours = records.all_partitions_record(added, deleted)
                else:
                    ours = records.files_record(added, deleted)
                assert ours == value, key
                compared += 1
    assert compared > 10


def test_record_index_records_are_the_bytes_hudi_wrote(hudi_mdt: Path) -> None:
    compared = 0
    for log in sorted((hudi_mdt / "record_index").glob(".record-index-*.log.*")):
        for block in log_file.read_blocks(log.read_bytes()):
            if block.type != log_file.HFILE_DATA:
                continue
            for _, value in HFile.read(bytes(block.content)).items():
                location = records.location_of(value, block.header[log_file.SCHEMA])
                assert location.file_id.endswith("-0") and len(location.file_id) == 38
                assert records.record_index_record(location) == value
                compared += 1
    assert compared > 10


def test_a_file_id_that_is_no_uuid_is_kept_as_a_string() -> None:
    # dynbucket's bucket file ids: 8 digits and a UUID's tail, no file index.
    loc = Location("day=d1", "00000003-5f1c-5d1e-9a3b-3c1f0e2d4b5a", 1772922357587)
    assert (
        records.decode(records.record_index_record(loc))["recordIndexMetadata"]["fileIdEncoding"]
        == records.STRING_ENCODING
    )
    assert records.location_of(records.record_index_record(loc)) == loc
    uuid_id = Location("", "c3b646cc-8602-47c5-b010-3fe002241298-12", -1)
    assert records.location_of(records.record_index_record(uuid_id)) == uuid_id


def test_instant_time_is_epoch_milliseconds_of_the_instant() -> None:
    assert records.instant_millis("20260307222557587") == 1772922357587
    assert records.instant_millis("19700101000000001") == 1
