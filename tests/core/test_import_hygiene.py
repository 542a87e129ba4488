"""Import hygiene: the core stays pure (no textual, asyncssh or httpx), the node-side code stands
alone, and no module of console imports itself back through others."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_no_ui_or_network_libraries():
    code = (
        "import sys, pkgutil, importlib, console.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('console.core.' + m.name)\n"
        "print(' '.join(sorted(x for x in ('textual', 'asyncssh', 'httpx', 'rich') if x in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"console.core pulled in: {out.stdout.strip()}"


def test_agent_and_sim_are_standalone():
    # They are shipped to nodes as folders of files: no imports from the console package.
    for path in [*(ROOT / "console" / "agent").glob("*.py"), *(ROOT / "console" / "sim").rglob("*.py")]:
        src = path.read_text()
        assert "from console" not in src and "import console" not in src, path


def _module_graph() -> dict[str, set[str]]:
    """console's modules and the console modules each imports, lazy (in-function) imports included."""
    modules = {}
    for path in (ROOT / "console").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                for alias in node.names:
                    # `from package import submodule` needs the submodule, not the package's __init__
                    deps.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def test_no_import_cycles_in_console():
    """No module imports, even lazily, something that imports it back: the layers read one way."""
    graph = _module_graph()
    assert "console.ui.keys" in graph["console.ui.app"]  # the graph sees what it should
    finished: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        for dep in sorted(graph[name]):
            assert dep not in path, "import cycle: " + " -> ".join(path[path.index(dep) :] + [dep])
            if dep not in finished:
                visit(dep, path + [dep])
        finished.add(name)

    for name in sorted(graph):
        if name not in finished:
            visit(name, [name])


# The layer order, top to bottom: a module may import its own layer and the layers below it.
LAYERS = ("console.cli", "console.ui", "console.services", "console.transport", "console.core")


def _layer(module: str) -> int | None:
    for rank, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return None


def test_layers_point_down():
    """cli > ui > services > transport > core: no arrow up, lazy imports included."""
    graph = _module_graph()
    assert graph["console.services.runs.serving"], "the graph sees services' imports"
    upward = []
    for name, deps in sorted(graph.items()):
        mine = _layer(name)
        if mine is None:
            continue
        for dep in sorted(deps):
            theirs = _layer(dep)
            if theirs is not None and theirs < mine:
                upward.append(f"{name} imports {dep}")
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def _private_uses() -> list[str]:
    """Each place a console module reaches into another module's underscore names."""
    graph_modules = set(_module_graph())
    found = []
    for path in sorted((ROOT / "console").rglob("*.py")):
        if path.is_symlink():
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        me = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # a local name bound to another console module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in graph_modules:
                        aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_") and not alias.name.startswith("__") and base != me:
                        if base in graph_modules or base.startswith("console."):
                            found.append(f"{me}: from {base} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in graph_modules and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != me
            ):
                found.append(f"{me}: {aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_module_reaches_into_another_modules_private_names():
    """A name with a leading underscore is its module's own; others use the public API."""
    uses = _private_uses()
    assert not uses, "private names used from another module:\n" + "\n".join(uses)
