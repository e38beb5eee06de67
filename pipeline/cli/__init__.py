"""The ``dynbucket`` command: its commands (``commands.py``), and the ones that are jobs of
their own (``demo``, ``ingest``)."""

from dynbucket.cli.commands import main, parser

__all__ = ["main", "parser"]
