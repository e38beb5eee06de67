"""Deprecated: the error hierarchy lives in ``dynbucket.base.errors`` (and every error is
``from dynbucket import ...``); this name stays for one release, with a warning."""

import sys
import warnings

from dynbucket.base import errors as _errors

warnings.warn(
    "dynbucket.actors.errors is deprecated: import errors from dynbucket "
    "(e.g. `from dynbucket import NotATableError`)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _errors
