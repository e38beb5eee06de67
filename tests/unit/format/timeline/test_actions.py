"""The actions are described once (``format/timeline/actions.py``): the lists callers use
are derived from it, and no module spells an action's name but where Hudi's own spelling
or another concept (a CLI command, an operation, a lap) shares it."""

from __future__ import annotations

import ast
from pathlib import Path

from dynbucket.format.hudi.instant_files import HUDI_ACTIONS
from dynbucket.format.services.registry import SERVICES
from dynbucket.format.timeline import actions
from dynbucket.format.timeline.actions import Action

PACKAGE = Path(__file__).resolve().parents[4] / "pipeline"

#: (module, text): a text that is an action's name but means another thing there.
OTHER_MEANINGS = {
    ("format/services/clean.py", "clean"),  # the clean's operation
    ("format/services/rollback.py", "rollback"),  # the rollback's operation
    ("format/metadata/files.py", "compaction"),  # the metadata table's timeline (Hudi's)
    ("format/metadata/files.py", "commit"),
    ("format/adoption/adopt.py", "commit"),  # a Hudi-written table's instants
    ("format/adoption/adopt.py", "clean"),
    ("format/adoption/adopt.py", "rollback"),
    ("format/adoption/deduplicate.py", "commit"),  # a sort column
    ("write/instant.py", "commit"),  # a write's lap
    ("cli/commands.py", "compaction"),  # a progress label and a bench's name (and below)
    ("cli/commands.py", "rollback"),  # the command
    ("bench/compaction.py", "compaction"),  # the bench's name
    ("console.py", "compaction"),
}


def test_the_lists_of_actions_are_derived_from_one_table() -> None:
    assert {a for a in Action if a.hudi} == set(HUDI_ACTIONS)
    assert set(actions.OWN_ACTIONS) | {a for a in Action if a.hudi} == set(actions.ACTIONS)
    assert set(actions.COMPACTIONS) <= set(actions.DETACHED_ACTIONS)
    assert Action.COMMIT not in actions.DETACHED_ACTIONS  # a write is settled by writers
    assert Action.ROLLBACK not in actions.DETACHED_ACTIONS
    # Every table service is an instant of a detached action, keyed by it.
    assert all(action == s.action and Action(action).detached for action, s in SERVICES.items())
    assert Action.COMMIT == "commit"  # plain text from storage compares equal


def test_no_module_spells_an_action_but_the_table() -> None:
    names = {a.value for a in Action}
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("format/hudi/") or rel == "format/timeline/actions.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in names
                and id(node) not in docstrings
                and (rel, node.value) not in OTHER_MEANINGS
            ):
                found.add(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, f"spell them as Action members (format/timeline/actions.py): {found}"
