"""The one error hierarchy of dynbucket.

Every error a user can get from dynbucket derives from :class:`DynBucketError`. Messages name
the field or option, the bad value, and the fix. The hierarchy lives in the bottom layer (the
assigner) so that every layer above can raise it without importing upwards; the public API
re-exports it as ``dynbucket.DynBucketError`` and friends.

An error raised inside a Spark task reaches the driver only as text (Spark wraps it in its
own exception). :func:`to_wire` puts the error object itself (class and fields, pickled) into
that text and :func:`from_wire` takes it out again, so the driver raises the same class with
the same fields, wherever the class is defined.
"""

from __future__ import annotations

import base64
import binascii
import pickle
import re
import sys


class DynBucketError(Exception):
    """Root of all dynbucket errors."""


# --- runtime -------------------------------------------------------------------------------


class RuntimeSetupError(DynBucketError):
    """Ray or Spark-on-Ray could not be started or joined."""


class JavaNotFoundError(RuntimeSetupError):
    """No usable Java runtime for Spark."""


# --- configuration and input ---------------------------------------------------------------


class ConfigError(DynBucketError, ValueError):
    """An option has a bad value."""


class InvalidInputError(DynBucketError, ValueError):
    """Records handed to a write are not acceptable; nothing was written."""


class SchemaMismatchError(InvalidInputError):
    """The records' schema does not match the table's schema."""


class NullKeyError(InvalidInputError):
    """A record key field holds a null."""


class InvalidPartitionValueError(InvalidInputError):
    """A partition field's value cannot be turned into a safe partition path."""


# --- table layer ---------------------------------------------------------------------------


class TableError(DynBucketError):
    """A problem with a table on storage."""


class NotATableError(TableError):
    """The path holds no dynbucket table."""


class NotAdoptedError(NotATableError):
    """The path holds a table that Apache Hudi wrote, not a dynbucket table."""


class AdoptionRefusedError(TableError):
    """A table Apache Hudi wrote that dynbucket cannot adopt yet; nothing was written."""


class UnsupportedTableVersionError(TableError):
    """The table is of a Hudi table version or timeline layout this dynbucket does not read
    (a Hudi 1.x writer upgraded it); nothing was read or written."""


class TableExistsError(TableError):
    """A table already exists where one was to be created."""


class TableCorruptedError(TableError):
    """Table metadata on storage is not what this version can read."""


class InstantNotFoundError(TableError):
    """An instant asked for is not on the timeline (or its files were cleaned)."""


class ConcurrentWriteError(TableError):
    """Another writer holds the table, or changed it under this writer (I9)."""


class CommitFailedError(TableError):
    """A commit could not be completed; what it wrote was rolled back."""


class UnsupportedStorageError(TableError):
    """The table's storage cannot do what safe commits need (an exclusive create); nothing
    was written."""


# --- assigner ------------------------------------------------------------------------------


class AssignerError(DynBucketError):
    """The bucket assigner cannot place a key."""


class BucketSpaceExhaustedError(AssignerError):
    """No bucket id is left for a new bucket."""


class AssignerRestartedError(AssignerError):
    """An assigner actor lost its state in the middle of an instant; the instant must retry."""


# --- across a process boundary that keeps only text --------------------------------------

_WIRE = re.compile(r"<dynbucket-error ([A-Za-z0-9+/=]+)>")


def to_wire(error: DynBucketError) -> str:
    """The error's message followed by its class, arguments and fields (pickled)."""
    # Ray re-raises an actor's error as a class made on the fly (``RayTaskError(X)``)
    # holding the original as ``cause``: carry the original.
    cause = getattr(error, "cause", None)
    if isinstance(cause, DynBucketError):
        error = cause
    cls = next(c for c in type(error).__mro__ if _importable(c))
    try:
        payload = pickle.dumps((cls, error.args, dict(error.__dict__)))
    except (pickle.PicklingError, TypeError, AttributeError):
        payload = pickle.dumps((cls, tuple(str(a) for a in error.args), {}))
    text = base64.b64encode(payload).decode("ascii")
    return f"{cls.__name__}: {error} <dynbucket-error {text}>"


def _importable(cls: type) -> bool:
    """Whether pickle can name ``cls`` (a class made at run time cannot be)."""
    module = sys.modules.get(cls.__module__)
    obj: object = module
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


def from_wire(text: str) -> DynBucketError | None:
    """The error :func:`to_wire` put into ``text`` (e.g. a Spark job's failure message), or
    None when the text holds none (or one this process cannot rebuild)."""
    match = _WIRE.search(text)
    if match is None:
        return None
    try:
        cls, args, fields = pickle.loads(base64.b64decode(match.group(1)))
    except (
        binascii.Error,
        pickle.UnpicklingError,
        AttributeError,
        ImportError,
        EOFError,
        TypeError,
        ValueError,
    ):
        return None
    if not (isinstance(cls, type) and issubclass(cls, DynBucketError)):
        return None
    # Rebuilt without calling __init__: a subclass's own signature does not matter.
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(fields)
    return error
