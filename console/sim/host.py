"""The host files a simulated node shows the doctor: a plausible MI300-class server.

``node_agent.py doctor --sysroot DIR`` reads /proc, /sys, /dev and /opt below
DIR; for simulated nodes the console uploads these files under
``<agent bundle>/sim/host/`` and points the doctor there, so the demo answers
like a well-set-up node (versions match the simulated amdsmi: ROCm 7.0.2,
amdgpu 6.12.12). The device nodes are plain empty files, readable and
writable by the user who uploaded them.
"""

from __future__ import annotations

RENDER_NODES = 8

FILES: dict[str, bytes] = {
    "proc/sys/kernel/numa_balancing": b"0\n",
    "sys/module/amdgpu/version": b"6.12.12\n",
    "opt/rocm/.info/version": b"7.0.2-56\n",
    "dev/kfd": b"",
    **{f"dev/dri/renderD{128 + i}": b"" for i in range(RENDER_NODES)},
}

ROCM_VERSION_FILE = "opt/rocm/.info/version"  # below a simulated node's simulator folder


def upgrade_rocm(sim_dir: str, version: str) -> str:
    """Give one simulated node another ROCm: the agent's probe reads
    ``<sim_dir>/opt/rocm/.info/version`` before the bundle's (the demo's "the node was
    upgraded under its users"). Returns the file written."""
    import os

    text = " ".join(str(version).split())
    if not text or "/" in text:
        raise ValueError("a ROCm version is one word, e.g. 7.1.0-21")
    path = os.path.join(sim_dir, *ROCM_VERSION_FILE.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text + "\n")
    return path
