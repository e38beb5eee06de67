"""Errors keep their class and fields across a boundary that passes only text (a Spark task's
failure), wherever the class is defined."""

from __future__ import annotations

import pytest

from dynbucket.base.errors import (
    DynBucketError,
    InvalidInputError,
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


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: not ours",
        "<dynbucket-error !!notbase64!!>",
        "<dynbucket-error aGVsbG8=>",  # base64 of b"hello": not a pickle
        # A pickle of something that is not a dynbucket error is not raised as one.
        "<dynbucket-error gASVGQAAAAAAAACMCGJ1aWx0aW5zlIwDbGVulJOUKX2Uh5Qu>",
    ],
)
def test_text_without_a_dynbucket_error_gives_none(text: str) -> None:
    assert from_wire(text) is None
