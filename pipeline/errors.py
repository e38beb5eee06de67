"""The one error hierarchy of dynbucket.

Every error a user can get from dynbucket derives from :class:`DynBucketError`. Messages name
the field or option, the bad value, and the fix.
"""

from __future__ import annotations


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


# --- assigner ------------------------------------------------------------------------------


class AssignerError(DynBucketError):
    """The bucket assigner cannot place a key."""


class BucketSpaceExhaustedError(AssignerError):
    """No bucket id is left for a new bucket."""


class AssignerRestartedError(AssignerError):
    """An assigner actor lost its state in the middle of an instant; the instant must retry."""


class SlotLayoutError(AssignerError):
    """A write planned with one shuffle met a file group whose rows span slots (a bucket
    created under another slot count); the write is redone with two shuffles."""
