"""The screens' CSS lives in .tcss files (Textual reloads them live under `textual run --dev`),
each one found beside its module and shipped in the wheel."""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from pathlib import Path

import tomllib
from textual.screen import Screen

import console.ui.screens as screens

ROOT = Path(__file__).resolve().parents[2]


def screen_classes() -> list[type[Screen]]:
    for info in pkgutil.iter_modules(screens.__path__):
        importlib.import_module(f"console.ui.screens.{info.name}")
    found: list[type[Screen]] = []
    todo = list(Screen.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("console.ui."):
            found.append(cls)
    return found


def test_no_screen_keeps_inline_css():
    classes = screen_classes()
    assert len(classes) >= 15
    inline = [c.__name__ for c in classes if "DEFAULT_CSS" in c.__dict__ or c.__dict__.get("CSS")]
    assert inline == []


def test_every_stylesheet_exists_and_ships_in_the_wheel():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]

    def shipped(path: Path) -> bool:
        relative = path.relative_to(ROOT)
        package, name = ".".join(relative.parent.parts), relative.name
        return any(fnmatch.fnmatch(name, glob) for glob in package_data.get(package, []))

    paths: set[Path] = set()
    for cls in screen_classes():
        css = cls.CSS_PATH
        for entry in css if isinstance(css, list) else [css] if css else []:
            path = Path(entry)
            assert path.is_absolute(), f"{cls.__name__}: a relative CSS_PATH follows a subclass's file"
            paths.add(path)
    assert {p.name for p in paths} >= {"form_dialog.tcss", "partition.tcss", "bench.tcss", "history.tcss"}
    for path in paths | set((ROOT / "console").rglob("*.tcss")):
        assert path.is_file(), path
        assert shipped(path), f"{path.relative_to(ROOT)} is not in [tool.setuptools.package-data]"
