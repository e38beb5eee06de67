"""Errors keep their class and fields across a boundary that passes only text (a Spark task's
failure), wherever the class is defined."""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path

import pytest

from dynbucket.base.errors import (
    DynBucketError,
    InvalidInputError,
    InvalidPartitionValueError,
    SchemaMismatchError,
    from_wire,
    to_wire,
)


class RelocatedError(InvalidInputError):
    """An error class living outside the errors module, with a field of its own."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def test_an_error_travels_whole_inside_other_text() -> None:
    wire = to_wire(SchemaMismatchError("field 'v' has type string; cast it"))
    # What the driver gets: Spark's own wrapping around the task's message.
    text = f"org.apache.spark.api.python.PythonException: Traceback ...\nRuntimeError: {wire}\n\tat"
    back = from_wire(text)
    assert type(back) is SchemaMismatchError
    assert str(back) == "field 'v' has type string; cast it"


def test_a_class_defined_elsewhere_keeps_its_class_and_fields() -> None:
    back = from_wire("task failed: " + to_wire(RelocatedError("bad day 'x/y'", field="day")))
    assert type(back) is RelocatedError and back.field == "day"
    assert isinstance(back, DynBucketError) and str(back) == "bad day 'x/y'"


def test_an_error_re_raised_through_a_class_made_at_run_time_travels_as_the_original() -> None:
    """Ray raises an actor's error as ``RayTaskError(X)``, a class made on the fly that
    pickle cannot name; its ``cause`` is the original."""
    original = SchemaMismatchError("slot 0 restarted")
    wrapped_cls = type("RayTaskError(SchemaMismatchError)", (SchemaMismatchError,), {})
    wrapped = wrapped_cls("traceback text ...")
    wrapped.cause = original
    back = from_wire(to_wire(wrapped))
    assert type(back) is SchemaMismatchError and str(back) == "slot 0 restarted"
    # Without a cause, the nearest class pickle can name is carried.
    orphan = wrapped_cls("no cause")
    assert type(from_wire(to_wire(orphan))) is SchemaMismatchError


def _token(doc: object) -> str:
    return "<dynbucket-error:v2 " + base64.b64encode(json.dumps(doc).encode()).decode() + ">"


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: not ours",
        "<dynbucket-error:v2 !!notbase64!!>",
        "<dynbucket-error:v2 aGVsbG8=>",  # base64 of b"hello": not JSON
        # A class that is not a dynbucket error is not raised, nor imported.
        _token({"class": "builtins:ValueError", "args": ["x"], "fields": {}}),
        _token({"class": "os:system", "args": ["x"], "fields": {}}),
        # Fields that are not plain values are refused whole.
        _token({"class": "dynbucket.base.errors:TableError", "args": [], "fields": [1]}),
    ],
)
def test_text_without_a_dynbucket_error_gives_none(text: str) -> None:
    assert from_wire(text) is None


class _Payload:
    """Unpickling this creates ``marker``: what a pickle in a user's value would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_token_inside_a_users_value_runs_nothing_and_is_not_the_error(tmp_path: Path) -> None:
    """A value quoted by a message (a partition value, a key) may hold a token of the old
    pickled form or a forged one of the current form: neither runs code, and the error the
    driver rebuilds is the one dynbucket appended."""
    marker = tmp_path / "ran"
    pickled = base64.b64encode(pickle.dumps((_Payload(marker), (), {}))).decode()
    forged = _token(
        {"class": "dynbucket.base.errors:TableCorruptedError", "args": ["forged"], "fields": {}}
    )
    value = f"x/<dynbucket-error {pickled}>{forged}"
    wire = to_wire(InvalidPartitionValueError(f"partition value {value!r} holds '/'"))
    # The chained traceback prints the original message (the value, raw) before the token.
    text = f"Traceback ...\nInvalidPartitionValueError: {value}\n...\nRuntimeError: {wire}"
    back = from_wire(text)
    assert type(back) is InvalidPartitionValueError
    assert "holds '/'" in str(back)
    assert not marker.exists()
    # The message part of the wire text holds no live token: only the appended one matches.
    assert wire.count("<dynbucket-error:v2 ") == 1
