"""The simulators' energy counters integrate their own power: a demo run's tokens/J and a
stored run's energy come out as they would on a real GPU (counter delta = power integral)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.sim.simulators import PYNVML_FILE, ROOT, SIM_DIR


def _stream(tmp_path, amdsmi_path) -> list[dict]:
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "console" / "agent"), "telemetry", "--interval", "0.3", "--count", "8",
         "--health-interval", "0", "--amdsmi-path", str(amdsmi_path)],
        env={"ROCM_CONSOLE_SIM_DIR": str(state), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in proc.stdout.splitlines() if '"kind":"sample"' in line]


def _nvidia_folder(tmp_path):
    folder = tmp_path / "nv"
    folder.mkdir()
    for name in ("pynvml.py", "nvml_errors.py", "faults.py", "statefiles.py"):
        (folder / name).write_bytes((SIM_DIR / name).read_bytes() if name != "pynvml.py" else PYNVML_FILE.read_bytes())
    return folder


@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
def test_energy_counter_grows_by_the_power_drawn(tmp_path, vendor):
    samples = _stream(tmp_path, SIM_DIR if vendor == "amd" else _nvidia_folder(tmp_path))
    for gpu in (0, 3):
        rows = [(s["ts"], s["gpus"][gpu]["energy_j"], s["gpus"][gpu]["power_w"]) for s in samples]
        counter = rows[-1][1] - rows[0][1]
        integral = sum((b[0] - a[0]) * (a[2] + b[2]) / 2 for a, b in zip(rows, rows[1:]))
        assert counter > 0
        assert counter == pytest.approx(integral, rel=0.03), (vendor, gpu)
