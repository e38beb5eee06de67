"""Hudi's bucket hash, pinned on values computed by Java 17 itself (jshell:
``Collections.singletonList(k).hashCode()``, ``Arrays.asList(a, b).hashCode()``, and
``(h & Integer.MAX_VALUE) % n``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.buckets.hudi_hash import bucket_ids, java_string_hash, list_hashes

#: key -> (String.hashCode, List.hashCode, bucket of 8, bucket of 13), from Java.
JAVA = {
    "hello": (99162322, 99162353, 1, 4),
    "user-42": (-147182656, -147182625, 7, 6),
    "": (0, 31, 7, 5),
    "ü€𝄞x": (536843550, 536843581, 5, 1),  # two- to four-byte UTF-8, a surrogate pair
    "k0000001": (-1427345562, -1427345531, 5, 10),
    "order_9999": (754604177, 754604208, 0, 7),
}


def _signed(values: list[int]) -> list[int]:
    return [v - (1 << 32) if v >= 1 << 31 else v for v in values]


def test_string_keys_hash_and_bucket_as_hudi_does() -> None:
    keys = list(JAVA)
    assert [java_string_hash(k) for k in keys] == [JAVA[k][0] for k in keys]
    h = list_hashes(pa.table({"id": keys}), ["id"])
    assert _signed(h.tolist()) == [JAVA[k][1] for k in keys]
    assert bucket_ids(h, 8).tolist() == [JAVA[k][2] for k in keys]
    assert bucket_ids(h, 13).tolist() == [JAVA[k][3] for k in keys]


def test_composite_keys_hash_the_list_of_their_values() -> None:
    rows = pa.table({"a": ["a1", "fr"], "b": pa.array([7, -12345678901], pa.int64())})
    h = list_hashes(rows, ["a", "b"])
    assert _signed(h.tolist()) == [95752, -2035646690]  # Arrays.asList("a1", "7"), ...
    assert bucket_ids(h, 8).tolist()[0] == 0
    assert bucket_ids(h, 5).tolist()[1] == 3


def test_a_key_holding_a_colon_is_split_as_hudi_splits_it() -> None:
    # "http://x" is split into {"http": "//x"}: no value for field "id", a null: 31 * 1 + 0.
    assert list_hashes(pa.table({"id": ["http://x"]}), ["id"]).tolist() == [31]
    with pytest.raises(InvalidInputError, match="cannot split"):
        list_hashes(pa.table({"a": ["x,y"], "b": ["z"]}), ["a", "b"])
