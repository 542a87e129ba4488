"""The agent and the simulator against the interface of the real ``amdsmi`` package.

The real package (PyPI amdsmi, pinned in the ``test`` extra) cannot be imported
here: without libamd_smi.so its import prints to stdout and raises KeyError.
So its source files are located through the installed distribution's metadata
and parsed with ``ast``, never executed.  Our side is parsed the same way, so a
new use in ``console/agent/*.py`` is checked without anyone listing it:

- every ``amdsmi_*`` function the agent calls or names exists in ``import amdsmi``,
  and each call passes a positional count and keyword names the real one accepts
  (helpers that take an amdsmi function name as first argument forward the rest:
  ``self._api("amdsmi_get_temp_metric", h, sensor, metric)``);
- every ``AmdSmi*`` enum and member, and exception method, exists;
- every key the agent reads from an amdsmi result (``dig(r, "k")``, ``r.get("k")``,
  ``r["k"]`` on a value that came from an amdsmi call in the same function) is a
  key of the dict the real function builds.

The simulator (console/sim/amdsmi/) follows the real interface: its public
names, signatures, enum values, exception classes and returned keys are checked
against the real ones, and it must return every key the agent reads.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.sim.simulators import amdsmi_sources, load_amdsmi

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILES = sorted((ROOT / "console" / "agent").glob("*.py"))
PINNED = "7.0.2"

API_FUNCTION = re.compile(r"^amdsmi_[a-z0-9_]+$")
API_CLASS = re.compile(r"^AmdSmi[A-Za-z0-9]+$")
DIG_HELPERS = ("dig",)  # dig(result, "k1", "k2", ...): nested key reads


# ------------------------------------------------------------- real package


@dataclass
class Params:
    """A def's parameters, enough to judge a call: names in order, how many are required."""

    positional: list[str]
    required: int
    varargs: bool = False
    keywords: list[str] = field(default_factory=list)  # keyword-only
    varkw: bool = False

    @classmethod
    def of(cls, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Params:
        a = node.args
        positional = [p.arg for p in a.posonlyargs + a.args]
        if positional and positional[0] in ("self", "cls"):
            positional = positional[1:]
        return cls(
            positional,
            len(positional) - len(a.defaults),
            a.vararg is not None,
            [p.arg for p in a.kwonlyargs],
            a.kwarg is not None,
        )

    def accepts(self, n_positional: int, keywords: list[str]) -> str | None:
        """None when a call with that shape is accepted, else why not."""
        if n_positional < self.required:
            return f"passes {n_positional} positional argument(s), needs at least {self.required}"
        if n_positional > len(self.positional) and not self.varargs:
            return f"passes {n_positional} positional argument(s), takes at most {len(self.positional)}"
        names = set(self.positional[n_positional:]) | set(self.keywords)
        for kw in keywords:
            if kw not in names and not self.varkw:
                return f"passes keyword {kw!r}, which it does not take"
        return None

    def describe(self) -> str:
        return "(" + ", ".join(p if i < self.required else p + "=..." for i, p in enumerate(self.positional)) + ")"


@dataclass
class Interface:
    version: str
    exports: set[str]  # what `import amdsmi; amdsmi.<name>` finds
    functions: dict[str, Params]
    enums: dict[str, dict[str, int | None]]  # enum -> member -> value
    exceptions: dict[str, dict]  # class -> {"bases", "methods", "init"}
    keys: dict[str, set[str]]  # function -> every key of the dicts it builds
    wrapper: dict[str, int]  # amdsmi_wrapper module constants


def dict_keys_in(node: ast.AST) -> set[str]:
    """String keys of dict literals and of `d["k"] = ...` stores anywhere under node."""
    keys = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            keys.update(k.value for k in sub.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        elif isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store):
            if isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, str):
                keys.add(sub.slice.value)
    return keys


def int_constants(tree: ast.Module) -> dict[str, int]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def enum_value(expr: ast.expr, wrapper: dict[str, int]) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "amdsmi_wrapper":
        return wrapper.get(expr.attr)
    return None


def package_dir() -> Path:
    try:
        dist = importlib.metadata.distribution("amdsmi")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("the real amdsmi package is not installed: pip install -e '.[test]' (it is in the test extra)")
    init = Path(dist.locate_file("amdsmi/__init__.py"))
    assert init.is_file(), f"amdsmi {dist.version}: no amdsmi/__init__.py at {init}"
    return init.parent


def read_interface(pkg: Path, version: str) -> Interface:
    parse = lambda name: ast.parse((pkg / name).read_text(encoding="utf-8"), filename=str(pkg / name))  # noqa: E731
    init, interface, exceptions, wrapper_tree = (
        parse(n) for n in ("__init__.py", "amdsmi_interface.py", "amdsmi_exception.py", "amdsmi_wrapper.py")
    )
    exports = {p.stem for p in pkg.glob("*.py") if not p.stem.startswith("__")}  # submodules, e.g. amdsmi_wrapper
    for node in ast.walk(init):  # includes the imports inside `try:` (ESMI functions)
        if isinstance(node, ast.ImportFrom):
            exports.update(a.asname or a.name for a in node.names)
    wrapper = int_constants(wrapper_tree)
    functions, keys, enums = {}, {}, {}
    for node in interface.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = Params.of(node)
            keys[node.name] = dict_keys_in(node)
        elif isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id.endswith("Enum") for b in node.bases
        ):
            enums[node.name] = {
                t.id: enum_value(s.value, wrapper)
                for s in node.body
                if isinstance(s, ast.Assign)
                for t in s.targets
                if isinstance(t, ast.Name)
            }
    classes = {}
    for node in exceptions.body:
        if isinstance(node, ast.ClassDef):
            methods = {s.name: Params.of(s) for s in node.body if isinstance(s, ast.FunctionDef)}
            classes[node.name] = {
                "bases": [b.id for b in node.bases if isinstance(b, ast.Name)],
                "methods": methods,
                "init": methods.get("__init__"),
            }
    for cls in classes.values():  # inherited methods and constructors
        base = cls["bases"][0] if cls["bases"] else None
        while base in classes:
            for m, p in classes[base]["methods"].items():
                cls["methods"].setdefault(m, p)
            cls["init"] = cls["init"] or classes[base]["init"]
            base = classes[base]["bases"][0] if classes[base]["bases"] else None
    return Interface(version, exports, functions, enums, classes, keys, wrapper)


@pytest.fixture(scope="module")
def real() -> Interface:
    pkg = package_dir()
    return read_interface(pkg, importlib.metadata.version("amdsmi"))


# ------------------------------------------------------------- our uses


@dataclass(frozen=True)
class Use:
    kind: str  # function, call, class, member, method, key
    name: str  # function / class name
    detail: str = ""  # member, key, or call shape
    where: str = ""
    n_positional: int = 0
    keywords: tuple[str, ...] = ()


def own_names(tree: ast.Module) -> set[str]:
    """Identifiers our code defines (defs, arguments, assignment targets, keyword
    names, argparse dests such as --amdsmi-path): never amdsmi API names."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        names.add(sub.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--"):
            names.add(node.value.lstrip("-").replace("-", "_"))
    return names


def const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def module_tuples(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level NAME = ("A", "B", ...) constants."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)):
            items = [const_str(e) for e in node.value.elts]
            if items and all(items):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[target.id] = tuple(items)
    return out


class UseCollector:
    """Walks one file of our code and lists its amdsmi uses (see the module docstring)."""

    def __init__(self, source: str, filename: str, shared_own: frozenset[str] = frozenset()):
        self.tree = ast.parse(source, filename=filename)
        self.filename = filename
        self.own = own_names(self.tree) | shared_own  # names our agent defines anywhere (AmdSmiCliSampler)
        self.tuples = module_tuples(self.tree)
        self.record_keys = record_key_constants(self.tree)
        self.uses: list[Use] = []

    def at(self, node: ast.AST) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', '?')}"

    def api_function(self, name: str | None) -> bool:
        return bool(name) and API_FUNCTION.match(name) is not None and name not in self.own

    def collect(self) -> list[Use]:
        for node in ast.walk(self.tree):
            self.names_and_calls(node)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.keys_in(node)
        return self.uses

    # -- names, calls, enums

    def names_and_calls(self, node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "args":
                return  # an argparse namespace (doctor's --amdsmi-path), not the library
            if self.api_function(node.attr):
                self.uses.append(Use("function", node.attr, where=self.at(node)))
            elif API_CLASS.match(node.attr) and node.attr not in self.own:
                self.uses.append(Use("class", node.attr, where=self.at(node)))
            inner = node.value
            if isinstance(inner, ast.Attribute) and API_CLASS.match(inner.attr) and inner.attr not in self.own:
                self.uses.append(Use("member", inner.attr, node.attr, self.at(node)))
            if node.attr.startswith("get_error_"):
                self.uses.append(Use("method", "AmdSmiLibraryException", node.attr, self.at(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in self.record_keys:
                return
            if self.api_function(node.value):
                self.uses.append(Use("function", node.value, where=self.at(node)))
            elif API_CLASS.match(node.value) and node.value not in self.own:
                self.uses.append(Use("class", node.value, where=self.at(node)))
            elif node.value.startswith("get_error_"):
                self.uses.append(Use("method", "AmdSmiLibraryException", node.value, self.at(node)))
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == 2:
            # ("AmdSmiComputePartitionType", COMPUTE_MODES): an enum and the members asked for by name
            enum, members = const_str(node.elts[0]), node.elts[1]
            if enum and API_CLASS.match(enum):
                names = (
                    self.tuples.get(members.id, ())
                    if isinstance(members, ast.Name)
                    else [const_str(e) for e in getattr(members, "elts", [])]
                )
                for member in names:
                    if member:
                        self.uses.append(Use("member", enum, member, self.at(node)))

    def call(self, node: ast.Call) -> None:
        func, args = node.func, node.args
        keywords = tuple(k.arg for k in node.keywords if k.arg)
        starred = any(isinstance(a, ast.Starred) for a in args)
        if isinstance(func, ast.Attribute) and self.api_function(func.attr) and not starred:
            self.uses.append(Use("call", func.attr, where=self.at(node), n_positional=len(args), keywords=keywords))
        elif args and self.api_function(const_str(args[0])) and not starred:
            # a forwarding helper: _api("amdsmi_x", a, b) calls amdsmi_x(a, b)
            self.uses.append(
                Use("call", const_str(args[0]), where=self.at(node), n_positional=len(args) - 1, keywords=keywords)
            )
        fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if fname == "enum_member" and len(args) == 3:
            enum, member = const_str(args[1]), const_str(args[2])
            if enum and member:
                self.uses.append(Use("member", enum, member, self.at(node)))

    # -- keys read from results

    def source_of(self, expr: ast.AST, tainted: dict[str, str]) -> str | None:
        """The amdsmi function whose result (or a part of it) expr is."""
        if isinstance(expr, ast.Name):
            return tainted.get(expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return tainted.get("self." + expr.attr)
        if isinstance(expr, ast.Call):
            func, args = expr.func, expr.args
            if isinstance(func, ast.Attribute) and self.api_function(func.attr):
                return func.attr
            if args and self.api_function(const_str(args[0])):
                return const_str(args[0])
            fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if fname in DIG_HELPERS and args:
                return self.source_of(args[0], tainted)
            if isinstance(func, ast.Attribute) and func.attr == "get":
                return self.source_of(func.value, tainted)
            if fname in ("list", "tuple", "enumerate", "sorted", "reversed") and args:
                return self.source_of(args[0], tainted)
        if isinstance(expr, ast.Subscript):
            return self.source_of(expr.value, tainted)
        if isinstance(expr, ast.BoolOp):
            for value in expr.values:
                found = self.source_of(value, tainted)
                if found:
                    return found
        return None

    def bind(self, target: ast.AST, source: str, tainted: dict[str, str]) -> None:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                tainted[sub.id] = source
            elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                tainted["self." + sub.attr] = source

    def keys_in(self, func: ast.FunctionDef) -> None:
        tainted: dict[str, str] = {}
        nodes = sorted((n for n in ast.walk(func) if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset))
        for _ in range(2):  # a second pass sees names bound later in a loop body
            for node in nodes:
                if isinstance(node, ast.Assign):
                    source = self.source_of(node.value, tainted)
                    if source:
                        for target in node.targets:
                            self.bind(target, source, tainted)
                elif isinstance(node, (ast.For, ast.comprehension)):
                    source = self.source_of(node.iter, tainted)
                    if source:
                        self.bind(node.target, source, tainted)
        seen = set()
        for node in nodes:
            for source, key in self.key_reads(node, tainted):
                if (source, key, node.lineno) not in seen:
                    seen.add((source, key, node.lineno))
                    self.uses.append(Use("key", source, key, self.at(node)))

    def key_reads(self, node: ast.AST, tainted: dict[str, str]):
        if isinstance(node, ast.Call):
            func, args = node.func, node.args
            fname = func.id if isinstance(func, ast.Name) else ""
            if fname in DIG_HELPERS and args:
                source = self.source_of(args[0], tainted)
                if source:
                    for arg in args[1:]:
                        if const_str(arg) is not None:
                            yield source, const_str(arg)
            if isinstance(func, ast.Attribute) and func.attr == "get" and args and const_str(args[0]) is not None:
                source = self.source_of(func.value, tainted)
                if source:
                    yield source, const_str(args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and const_str(node.slice):
            source = self.source_of(node.value, tainted)
            if source:
                yield source, const_str(node.slice)


def record_key_constants(tree: ast.Module) -> set[int]:
    """ids of string constants that key our own records: facts["amdsmi_error"] = ..., {"amdsmi_package": ...}.

    Names such as these start like API functions but are keys of the doctor's JSON, never looked up in amdsmi.
    """
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            out.add(id(node.slice))
        elif isinstance(node, ast.Dict):
            out.update(id(k) for k in node.keys if k is not None)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "facts"
            and node.args
        ):
            out.add(id(node.args[0]))
    return out


def collect_uses(source: str, filename: str, shared_own: frozenset[str] = frozenset()) -> list[Use]:
    return UseCollector(source, filename, shared_own).collect()


def agent_uses() -> list[Use]:
    sources = {path: path.read_text(encoding="utf-8") for path in AGENT_FILES}
    shared_own = frozenset().union(*(own_names(ast.parse(text)) for text in sources.values()))
    uses = []
    for path, text in sources.items():
        uses += collect_uses(text, str(path.relative_to(ROOT)), shared_own)
    return uses


def mismatches(uses: list[Use], real: Interface) -> list[str]:
    """One line per use that the real interface does not have, naming it."""
    out = []
    for use in uses:
        where = use.where + ": "
        if use.kind == "function" and use.name not in real.exports:
            out.append(f"{where}amdsmi.{use.name} does not exist in amdsmi {real.version}")
        elif use.kind == "call" and use.name in real.exports and use.name in real.functions:
            why = real.functions[use.name].accepts(use.n_positional, list(use.keywords))
            if why:
                out.append(f"{where}amdsmi.{use.name}{real.functions[use.name].describe()}: the call {why}")
        elif use.kind == "class" and use.name not in real.exports:
            out.append(f"{where}amdsmi.{use.name} does not exist in amdsmi {real.version}")
        elif use.kind == "member":
            if use.name not in real.exports:
                out.append(f"{where}amdsmi.{use.name} does not exist in amdsmi {real.version}")
            elif use.detail not in real.enums.get(use.name, {}):
                out.append(f"{where}amdsmi.{use.name}.{use.detail}: no such member in amdsmi {real.version}")
        elif use.kind == "method":
            cls = real.exceptions.get(use.name)
            if cls is None or use.detail not in cls["methods"]:
                out.append(f"{where}{use.name}.{use.detail}(): no such method in amdsmi {real.version}")
        elif use.kind == "key" and use.name in real.keys and use.detail not in real.keys[use.name]:
            out.append(f"{where}amdsmi.{use.name}() returns no key {use.detail!r} in amdsmi {real.version}")
    return sorted(set(out))


# ------------------------------------------------------------- the simulator


def sim_definitions() -> tuple[ast.Module, dict[str, ast.AST]]:
    """The simulator's modules as one tree (its package re-exports them) and its public API names."""
    tree = ast.Module(body=[], type_ignores=[])
    for path in amdsmi_sources():
        tree.body += ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body
    public = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            public[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    public[target.id] = node
    return tree, {n: v for n, v in public.items() if API_FUNCTION.match(n) or API_CLASS.match(n)}


def load_sim():
    return load_amdsmi("amdsmi_sim_contract")


def sim_returned_keys(func: ast.FunctionDef, tree: ast.Module) -> set[str]:
    """Keys of the dicts a simulator function builds, and of the N/A dicts it returns
    through _all_na(keys) (keys a literal, a local or a module-level tuple)."""
    keys = dict_keys_in(func)
    tuples = module_tuples(tree)
    local = {
        t.id: n.value for n in ast.walk(func) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_all_na" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Name):
                if arg.id in tuples:
                    keys.update(tuples[arg.id])
                    continue
                arg = local.get(arg.id, arg)
            keys.update(const_str(e) for e in getattr(arg, "elts", []) if const_str(e))
    return keys


# ------------------------------------------------------------- tests


def test_the_real_package_is_the_pinned_release(real):
    assert real.version == PINNED, f"installed amdsmi {real.version}, pyproject's test extra pins {PINNED}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"amdsmi=={PINNED}"' in pyproject
    # the interface was really read: the calls the agent depends on are there
    assert {"amdsmi_init", "amdsmi_get_gpu_metrics_info", "amdsmi_get_gpu_vram_usage"} <= real.exports
    assert "xcp_stats.gfx_busy_inst" in real.keys["amdsmi_get_gpu_metrics_info"]
    assert real.enums["AmdSmiComputePartitionType"]["CPX"] == 5


def test_the_collector_sees_the_agent_uses():
    """A blind collector would pass everything: the agent's known uses must show up."""
    uses = agent_uses()
    calls = {u.name for u in uses if u.kind == "call"}
    assert {
        "amdsmi_init",
        "amdsmi_get_gpu_metrics_info",
        "amdsmi_get_gpu_vram_usage",
        "amdsmi_get_gpu_process_list",
        "amdsmi_set_gpu_compute_partition",
        "amdsmi_set_gpu_memory_partition",
        "amdsmi_gpu_driver_reload",
    } <= calls
    keys = {(u.name, u.detail) for u in uses if u.kind == "key"}
    assert ("amdsmi_get_gpu_metrics_info", "xcp_stats.gfx_busy_inst") in keys
    assert ("amdsmi_get_gpu_vram_usage", "vram_used") in keys
    assert ("amdsmi_get_gpu_process_list", "vram_mem") in keys
    members = {(u.name, u.detail) for u in uses if u.kind == "member"}
    assert ("AmdSmiComputePartitionType", "CPX") in members and ("AmdSmiMemoryPartitionType", "NPS4") in members
    assert ("AmdSmiLibraryException", "get_error_code") in {(u.name, u.detail) for u in uses if u.kind == "method"}


def test_agent_uses_only_the_real_interface(real):
    found = mismatches(agent_uses(), real)
    assert not found, "the agent uses what amdsmi %s does not have:\n  %s" % (real.version, "\n  ".join(found))


def test_simulator_defines_only_real_names(real):
    _, public = sim_definitions()
    extra = sorted(n for n in public if n not in real.exports)
    assert not extra, f"console/sim/amdsmi/ defines names amdsmi {real.version} does not export: {extra}"


def test_simulator_package_exports_every_api_name_its_modules_define():
    # the agent calls getattr(amdsmi, name): a name left out of __init__ would be missing on the node
    _, public = sim_definitions()
    sim = load_sim()
    missing = sorted(n for n in public if not hasattr(sim, n))
    assert not missing, f"console/sim/amdsmi/__init__.py does not export {missing}"
    assert {"amdsmi_init", "amdsmi_get_gpu_metrics_info", "AmdSmiLibraryException"} <= set(public)


def test_simulator_signatures_match(real):
    _, public = sim_definitions()
    wrong = []
    for name, node in sorted(public.items()):
        if not isinstance(node, ast.FunctionDef) or name not in real.functions:
            continue
        ours, theirs = Params.of(node), real.functions[name]
        if ours.positional != theirs.positional or ours.required != theirs.required:
            wrong.append(f"{name}{ours.describe()} vs real {name}{theirs.describe()}")
    assert not wrong, "simulator signatures differ from amdsmi %s:\n  %s" % (real.version, "\n  ".join(wrong))


def test_simulator_enums_and_status_codes_match(real):
    sim = load_sim()
    wrong = []
    for name in sorted(real.enums):
        ours = getattr(sim, name, None)
        if ours is None:
            continue
        for member in ours.__members__:
            if member not in real.enums[name]:
                wrong.append(f"{name}.{member}: not in the real enum")
            elif real.enums[name][member] is not None and int(ours[member]) != real.enums[name][member]:
                wrong.append(f"{name}.{member} = {int(ours[member])}, real {real.enums[name][member]}")
    for const in dir(sim.amdsmi_wrapper):
        if const.startswith("AMDSMI_STATUS_"):
            if const not in real.wrapper:
                wrong.append(f"amdsmi_wrapper.{const}: not in the real wrapper")
            elif getattr(sim.amdsmi_wrapper, const) != real.wrapper[const]:
                wrong.append(
                    f"amdsmi_wrapper.{const} = {getattr(sim.amdsmi_wrapper, const)}, real {real.wrapper[const]}"
                )
    assert not wrong, "simulator enums differ from amdsmi %s:\n  %s" % (real.version, "\n  ".join(wrong))


def test_simulator_exceptions_match(real):
    sim = load_sim()
    wrong = []
    for name, spec in sorted(real.exceptions.items()):
        ours = getattr(sim, name, None)
        if ours is None:
            if name in (
                "AmdSmiException",
                "AmdSmiLibraryException",
                "AmdSmiRetryException",
                "AmdSmiTimeoutException",
                "AmdSmiParameterException",
            ):
                wrong.append(f"{name}: missing (the agent or the simulator raises/catches it)")
            continue
        bases = [b.__name__ for b in ours.__bases__]
        if bases != spec["bases"]:
            wrong.append(f"{name} bases {bases}, real {spec['bases']}")
        for method in spec["methods"]:
            if not method.startswith("_") and not hasattr(ours, method) and method.startswith("get_"):
                wrong.append(f"{name}.{method}() missing")
        init = spec["init"]
        if init is not None:
            params = [p for p in inspect.signature(ours.__init__).parameters.values() if p.name != "self"]
            required = [p.name for p in params if p.default is inspect.Parameter.empty]
            if required != init.positional[: init.required]:
                wrong.append(f"{name}({', '.join(required)}) needs other arguments than real {name}{init.describe()}")
    assert not wrong, "simulator exceptions differ from amdsmi %s:\n  %s" % (real.version, "\n  ".join(wrong))


def test_simulator_returns_real_keys_and_every_key_the_agent_reads(real):
    tree, public = sim_definitions()
    produced = {
        name: sim_returned_keys(node, tree) for name, node in public.items() if isinstance(node, ast.FunctionDef)
    }
    wrong = []
    for name, keys in sorted(produced.items()):
        if name in real.keys and real.keys[name]:
            for key in sorted(keys - real.keys[name]):
                wrong.append(f"{name}() returns {key!r}, which the real one never returns")
    for use in agent_uses():
        if use.kind == "key" and use.name in produced and use.detail in real.keys.get(use.name, ()):
            if use.detail not in produced[use.name]:
                wrong.append(
                    f"{name_of(use)}: the agent reads {use.detail!r} ({use.where}) but the simulator never returns it"
                )
    assert not wrong, "simulator results differ from amdsmi %s:\n  %s" % (real.version, "\n  ".join(sorted(set(wrong))))


def name_of(use: Use) -> str:
    return use.name + "()"


SYNTHETIC = """
class Sampler:
    def tick(self, h):
        bogus = self._api("amdsmi_get_gpu_warp_drive", h)
        temp = self._api("amdsmi_get_temp_metric", h)
        power = self._api("amdsmi_get_power_info", h)
        watts = dig(power, "current_socket_power", "socket_watts")
        clock = enum_member(self.m, "AmdSmiClkType", "WARP")
        fine = self.m.amdsmi_get_clock_info(h, self.m.AmdSmiClkType.GFX, extra=1)
        metrics = self.m.amdsmi_get_gpu_metrics_info(h)
        for xcp in metrics.get("xcp_stats") or []:
            pass
        code = exc.get_error_number()
        return self.m.AmdSmiFluxCapacitor.ON
"""


def test_a_use_the_real_package_lacks_is_named(real):
    found = mismatches(collect_uses(textwrap.dedent(SYNTHETIC), "synthetic.py"), real)
    text = "\n".join(found)
    assert "synthetic.py:4: amdsmi.amdsmi_get_gpu_warp_drive does not exist" in text
    assert (
        "synthetic.py:5: amdsmi.amdsmi_get_temp_metric(processor_handle, sensor_type, metric): the call passes "
        "1 positional argument(s), needs at least 3" in text
    )
    assert "synthetic.py:7: amdsmi.amdsmi_get_power_info() returns no key 'socket_watts'" in text
    assert "current_socket_power" not in text  # a real key is not reported
    assert "synthetic.py:8: amdsmi.AmdSmiClkType.WARP: no such member" in text
    assert (
        "synthetic.py:9: amdsmi.amdsmi_get_clock_info(processor_handle, clock_type): the call passes keyword "
        "'extra'" in text
    )
    assert "synthetic.py:11: amdsmi.amdsmi_get_gpu_metrics_info() returns no key 'xcp_stats'" in text
    assert "synthetic.py:13: AmdSmiLibraryException.get_error_number(): no such method" in text
    assert "synthetic.py:14: amdsmi.AmdSmiFluxCapacitor does not exist" in text
    assert len(found) == 8, text


def test_the_collector_sees_the_health_reads(real):
    """The health calls of amd_health.py (and the energy / residency keys the sampler reads
    from gpu_metrics) are among the uses held against the real package above: every
    function, its argument count, the enum members watched and the keys read."""
    uses = agent_uses()
    calls = {u.name for u in uses if u.kind == "call" and u.where.startswith("console/agent/amd_health.py")}
    assert {"amdsmi_get_gpu_total_ecc_count", "amdsmi_get_gpu_ecc_count", "amdsmi_get_gpu_cper_entries"} <= calls
    cper = [u for u in uses if u.kind == "call" and u.name == "amdsmi_get_gpu_cper_entries"]
    assert cper and all(real.functions[u.name].accepts(4, []) is None for u in cper)  # handle, mask, size, cursor
    named = {u.name for u in uses if u.kind == "function" and u.where.startswith("console/agent/amd_health.py")}
    assert {
        "amdsmi_get_gpu_bad_page_info",
        "amdsmi_get_pcie_info",
        "amdsmi_get_violation_status",
        "amdsmi_get_gpu_xgmi_link_status",
        "amdsmi_get_energy_count",
        "amdsmi_get_fw_info",
    } <= named
    # those are called in a loop as _call(name, gpu): each takes the processor handle only
    for name in named - calls:
        assert real.functions[name].accepts(1, []) is None, name
    members = {(u.name, u.detail) for u in uses if u.kind == "member"}
    for event in ("VMFAULT", "GPU_PRE_RESET", "GPU_POST_RESET"):
        assert ("AmdSmiEvtNotificationType", event) in members
    classes = {u.name for u in uses if u.kind == "class"}
    assert {"AmdSmiEventReader", "AmdSmiEvtNotificationType", "AmdSmiGpuBlock"} <= classes
    # the gpu_metrics keys the sampler reads for energy_j / throttled and the health reading carries
    sys_path = str(ROOT / "console" / "agent")
    import sys

    sys.path.insert(0, sys_path)
    try:
        import amd_health
        import amdsmi_sampler
    finally:
        sys.path.remove(sys_path)
    metric_keys = real.keys["amdsmi_get_gpu_metrics_info"]
    for key in amdsmi_sampler.RESIDENCY_KEYS + amd_health.METRICS_HEALTH_KEYS + ("energy_accumulator",):
        assert key in metric_keys, key
    assert "counter_resolution" in real.keys["amdsmi_get_energy_count"]
    # the per-block read skips the real enum's non-blocks by these names
    assert {"INVALID", "RESERVED"} <= set(real.enums["AmdSmiGpuBlock"]) | set(amd_health._SKIP_BLOCKS)
    assert set(real.enums["AmdSmiGpuBlock"]) >= {"UMC", "SDMA", "GFX", "MMHUB", "INVALID", "RESERVED"}
