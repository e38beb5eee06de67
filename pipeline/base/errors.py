"""The one error hierarchy of dynbucket.

Every error a user can get from dynbucket derives from :class:`DynBucketError`. Messages name
the field or option, the bad value, and the fix. The hierarchy lives in the bottom layer
(``base/``, which every room imports) so that every layer can raise it without importing
upwards; the public API re-exports every class of it (``from dynbucket import ...``).

An error raised inside a Spark task reaches the driver only as text (Spark wraps it in its
own exception). :func:`to_wire` puts the error's class name, arguments and plain fields into
that text as JSON and :func:`from_wire` takes them out again, so the driver raises the same
class with the same fields, wherever the class is defined. Nothing in that text is ever
unpickled or executed: it holds users' values.
"""

from __future__ import annotations

import base64
import binascii
import json
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


class TableClosedError(TableError):
    """A write (or a service) on a :class:`~dynbucket.Table` after its ``close()``."""


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


class DataFileMissingError(TableCorruptedError, FileNotFoundError):
    """A data file of a completed instant that a read listed is gone. A reader decides
    what that means (a clean beside it: read again; else a lost file); a writer runs its
    write again once on a fresh view (``FileNotFoundError``), and fails with
    :class:`CommitFailedError` if the file is gone from that view too."""


class FormatError(TableCorruptedError, ValueError):
    """A file of the table that its parser cannot read as the format says (the message
    names the file and what is wrong in it)."""


class ForeignFileGroupError(TableError):
    """A partition holds a file group that dynbucket did not write and adoption did not
    record (another Hudi writer's, or a stray copy): its keys have no bucket."""


class InstantNotFoundError(TableError):
    """An instant asked for is not on the timeline (or its files were cleaned)."""


class IncompleteRangeError(InstantNotFoundError):
    """An incremental read's ``end`` is past a write still pending (another writer's, begun
    earlier, not yet completed): a change feed reading it would skip that write's rows."""


class ConcurrentWriteError(TableError):
    """Another writer holds the table, or changed it under this writer (I9)."""


class WriteConflictError(ConcurrentWriteError):
    """A commit conflicts with an instant another writer completed since the write began
    (several writers: ``hoodie.write.concurrency.mode``); nothing of it was committed. The
    write is run again (``concurrency.conflict-retries``) before this reaches a caller."""


class CommitFailedError(TableError):
    """A commit could not be completed; what it wrote was rolled back."""


class StorageError(TableError, OSError):
    """A request to the table's storage kept failing after it was made again (an object
    store that fails requests, a network that drops them); an ``OSError`` too."""


class CommitStateUnknownError(TableError):
    """A write's commit request was sent and its answer lost: the write may or may not have
    committed. Read the table (``Table.history()``, or its rows) to learn which; running the
    write again is safe for upserts and deletes (their keys end as the write says)."""


class PublishPendingError(TableError):
    """A write committed (its outcome is decided: it stands), but making it visible to
    readers failed after the retries. Nothing is lost and nothing needs writing again: the
    next writer, or ``dynbucket rollback``, publishes it."""


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

# The token dynbucket appends to a task's failure text: base64 of a JSON document (class
# name, message arguments, plain fields). JSON runs nothing on load, and the class is looked
# up by name among DynBucketError's subclasses, so a token forged inside a user's value (a
# key, a partition value quoted in a message) can at worst name another dynbucket error.
_WIRE = re.compile(r"<dynbucket-error:v2 ([A-Za-z0-9+/=]+)>")
_LOOKALIKE = re.compile(r"<(dynbucket-error)", re.IGNORECASE)
_PLAIN = (str, int, float, bool, type(None))


def to_wire(error: DynBucketError) -> str:
    """The error's message followed by a token holding its class, arguments and plain fields.

    A token-like text inside the message (a user's value) is defanged, so the token appended
    last is the only one in the text this call makes."""
    # Ray re-raises an actor's error as a class made on the fly (``RayTaskError(X)``)
    # holding the original as ``cause``: carry the original.
    cause = getattr(error, "cause", None)
    if isinstance(cause, DynBucketError):
        error = cause
    cls = next(c for c in type(error).__mro__ if _importable(c))
    doc = {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "args": [a if isinstance(a, _PLAIN) else str(a) for a in error.args],
        "fields": {k: v for k, v in error.__dict__.items() if _is_plain(v)},
    }
    token = base64.b64encode(json.dumps(doc).encode()).decode("ascii")
    return f"{cls.__name__}: {defang(str(error))} <dynbucket-error:v2 {token}>"


def defang(text: str) -> str:
    """``text`` with anything that looks like a wire token made inert."""
    # A zero-width space after "<": the value reads the same, the pattern no longer matches.
    return _LOOKALIKE.sub(lambda m: "<\u200b" + m.group(1), text)


def _is_plain(value: object) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def _importable(cls: type) -> bool:
    """Whether ``cls`` can be named by module and qualified name (a class made at run time
    cannot be)."""
    module = sys.modules.get(cls.__module__)
    obj: object = module
    for name in cls.__qualname__.split("."):
        obj = getattr(obj, name, None)
    return obj is cls


def _error_class(name: str) -> type[DynBucketError] | None:
    """The DynBucketError subclass (or the root) named ``module:qualname``, among the classes
    this process has defined; nothing is imported."""
    todo: list[type[DynBucketError]] = [DynBucketError]
    while todo:
        cls = todo.pop()
        if f"{cls.__module__}:{cls.__qualname__}" == name:
            return cls
        todo.extend(cls.__subclasses__())
    return None


def from_wire(text: str) -> DynBucketError | None:
    """The error :func:`to_wire` put into ``text`` (e.g. a Spark job's failure message), or
    None when the text holds none (or one this process cannot rebuild).

    The last token is taken: the one dynbucket appended after the message (a chained
    traceback prints the original error, and any user value in it, before it)."""
    matches = _WIRE.findall(text)
    if not matches:
        return None
    try:
        doc = json.loads(base64.b64decode(matches[-1], validate=True))
        cls = _error_class(doc["class"])
        args = tuple(doc["args"])
        fields = doc["fields"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None
    if cls is None or not isinstance(fields, dict):
        return None
    if not all(isinstance(a, _PLAIN) for a in args) or not all(map(_is_plain, fields.values())):
        return None
    # Rebuilt without calling __init__: a subclass's own signature does not matter.
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(fields)
    return error
