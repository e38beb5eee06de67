"""Data file names: base and log files, and what they say."""

from __future__ import annotations

from dynbucket.format.hudi.files import ParsedName, base_name, log_name, parse

FID = "00000003-5a1b-5c2d-8e3f-0123456789ab"


def test_names_say_the_instant_that_wrote_them() -> None:
    base = base_name(FID, "20260101000000001")
    assert base == f"{FID}_0-20260101000000001-0_20260101000000001.parquet"
    assert parse(base) == ParsedName(FID, "base", "20260101000000001", "20260101000000001")
    log = log_name(FID, "20260101000000001", 3, "20260102000000002")
    assert log == f".{FID}_20260101000000001.log.3_0-20260102000000002-0"
    assert parse(log) == ParsedName(FID, "log", "20260102000000002", "20260101000000001", 3)


def test_other_files_are_not_data_files() -> None:
    for name in [
        ".hoodie_partition_metadata",
        f".{base_name(FID, '20260101000000001')}.tmp-ab12",
        "part-0000.parquet",
    ]:
        assert parse(name) is None, name


def test_a_log_hudi_wrote_is_a_log_whose_name_does_not_say_its_instant() -> None:
    hudi = "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    assert parse(f".{hudi}_20260101000000001.log.2_0-51-115") == ParsedName(
        hudi, "log", "", "20260101000000001", 2
    )
