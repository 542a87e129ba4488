"""`python3 <agent folder> MODE ...`: the console's way to start the agent on a node.

The agent is imported rather than run as a script, so Python caches its compiled form in
``__pycache__`` beside it and each start skips compiling it. Run from the source
tree (`python -m console.agent`), the folder is not on sys.path: it is put there first,
as it would be for the shipped folder.
"""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
if here not in sys.path:
    sys.path.insert(0, here)

import node_agent  # type: ignore[import-not-found]  # noqa: E402 - shipped beside this file

sys.exit(node_agent.main())
