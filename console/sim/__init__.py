"""Simulated AMD Instinct node for the demo and fast tests.

`amdsmi/` is a stand-in for the real `amdsmi` Python package (same call
names, return shapes, units, enums and exceptions), `pynvml.py` one for NVIDIA's,
with their state kept in a folder (`ROCM_CONSOLE_SIM_DIR`). They are self-contained
on purpose: the node agent uploads them and imports them as the top-level `amdsmi`
and `pynvml`. `statefiles.py` (here, in amdsmi/ and in vllm/) is a git symlink to
console/agent/statefiles.py, the helpers they share with the agent's supervisor.
Nothing here is used unless the simulator is asked for.
"""
