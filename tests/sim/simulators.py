"""Where the simulators live and how a test loads a private copy of one, as the node agent would."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SIM_DIR = ROOT / "console" / "sim"
AMDSMI_DIR = SIM_DIR / "amdsmi"  # the package imported as `amdsmi` from SIM_DIR (the agent's --amdsmi-path)
PYNVML_FILE = SIM_DIR / "pynvml.py"  # imported as `pynvml`, statefiles.py and faults.py beside it
FAULTS_FILE = SIM_DIR / "faults.py"  # the simulated faults (faults.json), shipped beside each simulator
STATEFILES = ROOT / "console" / "agent" / "statefiles.py"  # the one real file; the simulators' copies link to it


def amdsmi_sources() -> list[Path]:
    return sorted(AMDSMI_DIR.glob("*.py"))


def load_amdsmi(name: str = "amdsmi_sim_under_test", folder: Path = AMDSMI_DIR) -> ModuleType:
    """A fresh copy of the simulated amdsmi package under `name`, with its own library state."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]  # a copy loaded earlier under this name: its modules go too
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its modules import each other relatively, as name.<module>
    spec.loader.exec_module(module)
    return module


def load_pynvml(name: str = "pynvml_sim_under_test", folder: Path = SIM_DIR) -> ModuleType:
    """A fresh copy of the simulated pynvml; its `import statefiles` finds the file beside it."""
    spec = importlib.util.spec_from_file_location(name, folder / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


def copy_amdsmi(dest: Path) -> Path:
    """The simulated amdsmi as the console uploads it: dest/amdsmi/ with real files (no links)."""
    shutil.copytree(AMDSMI_DIR, dest / "amdsmi", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def copy_pynvml(dest: Path) -> Path:
    """The simulated NVML as the console uploads it to an NVIDIA node: pynvml.py, nvml_errors.py, statefiles.py, faults.py."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(PYNVML_FILE, dest / "pynvml.py")
    shutil.copy(STATEFILES, dest / "statefiles.py")
    shutil.copy(FAULTS_FILE, dest / "faults.py")
    shutil.copy(SIM_DIR / "nvml_errors.py", dest / "nvml_errors.py")  # its constants and exceptions
    return dest
