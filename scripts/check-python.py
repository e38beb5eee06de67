"""Fails early, with the fix, when the interpreter is not Python 3.11."""

import sys

if sys.version_info[:2] != (3, 11):
    sys.exit(
        f"dynbucket needs Python 3.11 (the pinned ray/raydp/pyspark wheels), found "
        f"{sys.version.split()[0]} at {sys.executable}; run `make PYTHON=/path/to/python3.11 ...`"
    )
