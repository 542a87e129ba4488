"""Code that runs on the GPU node, shipped there by the console.

The folder is uploaded as it is (console/services/agent_bundle.py lists its files) and
run as ``python3 <folder> MODE`` (``__main__.py`` imports ``node_agent.py``); the modules
import each other by file name (stdlib + amdsmi, Python >= 3.8); nothing in this
package may import from ``console``.
"""
