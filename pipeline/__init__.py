"""dynbucket's pipeline: runtime, table layer, Spark stages, public API and CLI.

Heavy modules (Ray, Spark) load on first use, so that ``dynbucket.pipeline.errors`` and the
plain cores stay cheap to import.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Runtime": "dynbucket.pipeline.runtime",
    "RuntimeConfig": "dynbucket.pipeline.runtime",
    "Table": "dynbucket.pipeline.table",
    "DynamicBucketIndex": "dynbucket.pipeline.spec",
    "TableOptions": "dynbucket.pipeline.spec",
    "WriteResult": "dynbucket.pipeline.results",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynbucket.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_LAZY)
