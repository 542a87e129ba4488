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
