"""No module of services/ or cli/ reaches into another module's private (underscore) names:
what one module needs from another has a public name (S2)."""

from __future__ import annotations

import ast
from pathlib import Path

import console

ROOT = Path(console.__file__).parent
CHECKED = ("services", "cli")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def foreign_private_uses(source: str) -> list[tuple[int, str]]:
    """(line, text) for each `from console.x import _y` and each `obj._y` where `_y` is not a
    name this module defines itself (its own classes' members may be used across them)."""
    tree = ast.parse(source)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("console"):
            found += [(node.lineno, f"import {a.name}") for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_check_finds_a_foreign_private_name():
    assert foreign_private_uses("from console.services.instances import _ACTIVE\n") == [(1, "import _ACTIVE")]
    assert foreign_private_uses("async def f(s):\n    await s.instances._call(1)\n") == [(2, "s.instances._call")]
    # a module's own private names, across its own classes, are its business
    assert foreign_private_uses("class A:\n    def _x(self): ...\n\ndef f(a):\n    return a._x()\n") == []


def test_services_and_cli_use_only_public_names_of_other_modules():
    offences = [
        f"{path.relative_to(ROOT.parent)}:{line}: {text}"
        for part in CHECKED
        for path in sorted((ROOT / part).rglob("*.py"))
        for line, text in foreign_private_uses(path.read_text(encoding="utf-8"))
    ]
    assert offences == []
