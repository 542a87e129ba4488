"""`rocm-console --demo --profile FILE` in a real terminal: the file's [keys] work, and what it
could not apply (its real nodes) is said in the console, once."""

from __future__ import annotations

import sys
import time

import pytest

from tests.ui.test_tmux_demo import ROOT, Tmux, pytestmark  # noqa: F401 (pytestmark: skipped without tmux)


@pytest.fixture
def term(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


def test_demo_honours_the_profiles_keys_and_says_what_it_left_out(term, tmp_path):
    profile = tmp_path / "mine.toml"
    profile.write_text('[keys]\nhelp = "f1"\n\n[nodes.gpu-a]\nhost = "gpu-a.lab"\n')
    command = f"cd {ROOT} && HOME={term.home} {sys.executable} -m console --demo --profile {profile}"
    term.tmux("new-session", "-d", "-s", term.session, "-x", "150", "-y", "40", command)
    screen = term.wait_for("4 live", timeout=20)
    assert "gpu-a" not in screen.split("left out")[0]  # never a row for the real node
    screen = term.wait_for("left out of mine.toml")
    # the notification's text, wrapped beside the table: the part right of its border on each line
    toast = " ".join(ln.rsplit("▌ ", 1)[1].strip() for ln in screen.splitlines() if "▌ " in ln)
    assert "--demo: left out of mine.toml: node gpu-a (not simulated on this machine)" in toast

    term.keys("?")  # rebound: ? no longer opens help ...
    time.sleep(0.5)
    assert "remap any key with an id" not in term.screen()
    term.keys("F1")  # ... F1 does, as the profile's [keys] says
    screen = term.wait_for("remap any key with an id")  # the help's title (toasts may cover its last column)
    assert "f1" in screen.lower()
    term.keys("Escape")
    term.wait_gone("remap any key with an id")
    term.keys("q")
