"""The view models (console/ui/model/) stay free of Textual: imported alone, none of them pulls
in textual, at import time or from inside a function, directly or through another module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "console" / "ui" / "model"
FORBIDDEN = ("textual", "textual_plotext")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside `if TYPE_CHECKING:` blocks (read by the type checker only)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def _imports(path: Path) -> set[str]:
    """Every module a file imports, in-function imports included, TYPE_CHECKING ones left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            found.add(base)
            if base.startswith("console"):  # `from package import module` needs that module
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _console_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def textual_paths() -> list[str]:
    """'console.ui.model.x -> console.y -> textual.widgets' for every way a model reaches Textual."""
    found = []
    seen: set[str] = set()
    todo = [(_module_name(p), [_module_name(p)]) for p in sorted(MODEL.glob("*.py"))]
    while todo:
        module, path = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        file = _console_file(module)
        if file is None:
            continue
        for dep in sorted(_imports(file)):
            if dep.split(".")[0] in FORBIDDEN:
                found.append(" -> ".join([*path, dep]))
            elif dep.startswith("console.") and dep not in seen:
                todo.append((dep, [*path, dep]))
    return found


def test_no_model_module_reaches_textual_even_lazily():
    assert len(list(MODEL.glob("*.py"))) >= 10  # the walk sees the models
    assert textual_paths() == []


def test_importing_every_model_loads_no_textual():
    code = (
        "import sys, pkgutil, importlib, console.ui.model as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    importlib.import_module('console.ui.model.' + info.name)\n"
        f"print(' '.join(sorted(x for x in {FORBIDDEN!r} if x in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"console.ui.model pulled in: {out.stdout.strip()}"


def test_the_walk_finds_a_lazy_textual_import(tmp_path, monkeypatch):
    """The check itself: a model module importing textual inside a function is caught."""
    fake = tmp_path / "console" / "ui" / "model"
    fake.mkdir(parents=True)
    for i in range(10):
        (fake / f"m{i}.py").write_text("import json\n", encoding="utf-8")
    (fake / "bad.py").write_text(
        "from console.ui.model import m1\n\ndef f():\n    from textual.widgets import Static\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "MODEL", fake)
    assert textual_paths() == ["console.ui.model.bad -> textual.widgets"]


def test_the_ui_uses_no_private_name_of_another_console_module():
    """`from console.x import _y` and `module._y` (module a console module) stay inside their module."""
    found = []
    for path in sorted((ROOT / "console" / "ui").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = set()  # names bound to console modules here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("console"):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
                    if _console_file(f"{node.module}.{alias.name}") is not None:
                        modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules.update(a.asname or a.name for a in node.names if a.name.startswith("console"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert found == []
