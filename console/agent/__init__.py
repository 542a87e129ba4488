"""Code that runs on the GPU node, shipped there by the console.

``node_agent.py`` is one self-contained file (stdlib + amdsmi, Python >= 3.8)
that the console uploads and runs as ``python3 node_agent.py MODE``; nothing
in this package may import from ``console``.
"""
