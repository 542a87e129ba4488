"""Simulated AMD Instinct node for the demo and fast tests.

`amdsmi.py` is a stand-in for the real `amdsmi` Python package (same call
names, return shapes, units, enums and exceptions), with its state kept in a
folder (`ROCM_CONSOLE_SIM_DIR`). It is self-contained on purpose: the node
agent uploads it and imports it as the top-level module `amdsmi`. Nothing here
is used unless the simulator is asked for.
"""
