"""Scenes: the real screens headless over recorded or synthetic data, for the SVG snapshot
tests (tests/ui/test_snapshots.py, test_bench_snapshots.py) and the README screenshots.

    python -m tests.ui.scenes              # the README set, into screenshots/
    python -m tests.ui.scenes all          # every scene
    python -m tests.ui.scenes fleet        # one scene (names: --help)
    textual run --dev tests.ui.scenes.dev_app   # the console over the looping traces, CSS live

Test scaffolding: it reads tests/fixtures/traces, so it stays out of the installed package.
"""
