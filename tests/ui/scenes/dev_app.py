"""The console over the scenes' recorded nodes, alive (their traces loop) with the scenes'
vLLM instances: no process runs anywhere. For Textual's dev tools, from the repository root:

    textual run --dev tests.ui.scenes.dev_app    # textual-dev (the test extra): CSS edits reload live
    python -m tests.ui.scenes.dev_app            # the same app without the dev tools
"""

from __future__ import annotations

from tests.ui.scenes.fleet import live_app

app = live_app()

if __name__ == "__main__":
    app.run()
