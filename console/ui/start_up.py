"""The TUI's start, from the `rocm-console` entry to the first frame: two costs of the
interpreter's own are held here (start-up is budgeted: tests/perf/startup.py).

- The cyclic garbage collector scans the new objects again and again while they pile up
  (Textual's and the console's modules: a full collection of 15-40 ms lands just before the
  first frame). It is off from the entry to the first frame; then what exists, which lives as
  long as the console, is frozen out of its sight (gc.freeze) and it is on again.
- Each dataclass's methods (__init__, __repr__, __eq__, __hash__, __setattr__ of the frozen
  ones), and each namedtuple's __new__, are made from source text that `dataclasses` (and
  `collections`) write and compile at every start: about a quarter of the CPU to the first
  frame. The compiled code is kept by its source text in the user's cache folder, as Python
  keeps .pyc files, and reused by the next start: the same text, so the same methods. A text
  not in the cache is compiled as before, and the cache is written again once the first
  frame is on screen.

hold() at the entry (console/cli), release() at the first frame (ConsoleApp) or where the
start ends otherwise; each does nothing when nothing is held. Stdlib only: it runs before
anything else is imported.

A command (`rocm-console results list`: a fresh process, budgeted by tests/perf/store_scale.py)
holds too, with a cache of its group's own (hold("cli-results")): the collector is on again
once its modules are in (resume_collector), and the cache is written at its end when it
compiled anything it lacked (release(keep=True)), then holding what the file held before too
(the group's other actions), up to CACHE_CAP texts.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
from types import CodeType, ModuleType

__all__ = ["cache_path", "hold", "release", "resume_collector"]

_state: dict[str, bool] = {"held": False, "gc_was_on": False, "gc_off": False, "missed": False}
_cache_name = [""]  # the held cache: "" the TUI's, "cli-GROUP" a command group's
CACHE_CAP = 4000  # texts in a command group's file (a start of the TUI uses ~1,500)
_loaded: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_patched: list[ModuleType] = []  # the modules whose exec / eval stand in (dataclasses, collections)
EVAL_KEY = "\0"  # before an eval text in the cache (no source text holds a NUL)


def cache_path(name: str = "") -> str:
    """The compiled dataclass methods (`name`: "" the TUI's, "cli-GROUP" a command group's), per
    interpreter (its bytecode differs from version to version); "" where there is no home to
    keep them in (nothing is read or written then)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(root):  # no HOME: "~" stays as it is, a folder of the working directory
        return ""
    stem = f"dataclass-code.{name}" if name else "dataclass-code"
    return os.path.join(root, "rocm-console", f"{stem}.{sys.implementation.cache_tag}.marshal")


def hold(cache: str = "") -> None:
    """Collector off and dataclass code from the cache (`cache`: see cache_path), until release()."""
    if _state["held"]:
        return
    _state.update(held=True, gc_was_on=gc.isenabled(), gc_off=True, missed=False)
    _cache_name[0] = cache
    gc.disable()
    _load_cache()
    import collections
    import dataclasses

    # dataclasses calls exec(text, globals, ns) for each method it makes, namedtuple
    # eval(text, namespace) for each __new__: a module global of that name is found before
    # the builtin one, nothing else of the module changes.
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    collections.eval = _eval  # type: ignore[attr-defined]
    _patched[:] = [dataclasses, collections]


def resume_collector() -> None:
    """A command's modules are in: what exists (modules, classes, the parser) is frozen out of
    the collector's sight and the collector is on again for the command's own work (a watcher,
    a server or `results list --all` may run long); the dataclass code stays held."""
    if not _state["held"] or not _state["gc_off"]:
        return
    _state["gc_off"] = False
    gc.freeze()
    if _state["gc_was_on"]:
        gc.enable()


def release(*, first_frame: bool = False, keep: bool = False) -> None:
    """End the hold. At the first frame: what exists is frozen out of the collector's sight
    and the cache is written if this start compiled anything it lacked. `keep` (a command's
    end, when it ran): the cache is written if anything was compiled, with what the file
    held before."""
    if not _state["held"]:
        return
    _state["held"] = False
    for module in _patched:
        vars(module).pop("exec", None)
        vars(module).pop("eval", None)
    _patched.clear()
    if first_frame:
        gc.freeze()
    if _state["missed"] and (first_frame or keep):
        kept = {**_loaded, **_used} if keep else _used
        if len(kept) <= CACHE_CAP:  # else what this run used, nothing else: old texts go
            _used.update(kept)
        _save_cache()
    if _state["gc_off"] and _state["gc_was_on"]:
        gc.enable()
    _state["gc_off"] = False
    _loaded.clear()
    _used.clear()


def _exec(source: str | CodeType, globals: dict | None = None, locals: dict | None = None, /) -> None:
    code = _compiled(source, "exec") if isinstance(source, str) else source
    exec(code, globals, locals)  # noqa: S102 - dataclasses' own call, with its text compiled


def _eval(source: str | CodeType, globals: dict | None = None, locals: dict | None = None, /) -> object:
    code = _compiled(source, "eval") if isinstance(source, str) else source
    return eval(code, globals, locals)  # noqa: S307 - namedtuple's own call, with its text compiled


def _compiled(source: str, mode: str) -> CodeType:
    key = source if mode == "exec" else EVAL_KEY + source
    code = _loaded.get(key)
    if code is None:
        # dont_inherit: compiled as exec() and eval() compile the text for their caller (no
        # __future__ flags of this module: the annotations of a method stay objects)
        code = compile(source, "<string>", mode, dont_inherit=True)
        _state["missed"] = True
    _used[key] = code
    return code


def _load_cache() -> None:
    path = cache_path(_cache_name[0])
    if not path:
        return
    try:
        with open(path, "rb") as f:
            magic, data = marshal.loads(f.read())  # marshal.load(f) reads in small pieces: 7x the time
    except (OSError, EOFError, ValueError, TypeError):
        return  # none yet, or unreadable: compiled as usual, written anew at the first frame
    # Bytecode written by another build of this Python version is not used (as for .pyc files).
    if magic == _magic() and isinstance(data, dict):
        _loaded.update((k, v) for k, v in data.items() if isinstance(k, str) and isinstance(v, CodeType))


def _magic() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER


def _save_cache() -> None:
    """What this start used, nothing else: the file stays the size of one start (~0.8 MB); a
    command's also what its file held (release)."""
    path = cache_path(_cache_name[0])
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            marshal.dump((_magic(), _used), f)
        os.replace(tmp, path)  # a start reading it meanwhile sees the old file or the new one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
