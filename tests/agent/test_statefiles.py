"""statefiles.py: the JSON state files and pid checks the supervisor and the simulators share.

One file, linked into every simulator folder that imports it; what it decides shows up as an
instance that reads "stopped" once its process is gone (a zombie included), and as a simulated
GPU whose memory is free again when the process that held it has ended.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import time

import pytest

from tests.sim.simulators import SIM_DIR, STATEFILES

COPIES = [SIM_DIR / "statefiles.py", SIM_DIR / "amdsmi" / "statefiles.py", SIM_DIR / "vllm" / "statefiles.py"]


@pytest.fixture(scope="module")
def sf():
    spec = importlib.util.spec_from_file_location("statefiles_under_test", STATEFILES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("copy", COPIES, ids=lambda p: str(p.relative_to(SIM_DIR)))
def test_each_simulator_folder_links_the_one_file(copy):
    # A link, not a copy that could drift; the bundle and the wheel turn it into a real file.
    assert copy.is_symlink() and copy.resolve() == STATEFILES.resolve()


def test_python38_stdlib_only():
    tree = ast.parse(STATEFILES.read_text(), feature_version=(3, 8))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported


def test_pid_alive_running_ended_zombie_and_no_pid(sf):
    assert sf.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(500):  # bounded: until it has exited (a zombie: not reaped yet)
            with open(f"/proc/{child.pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        assert not sf.pid_alive(child.pid)  # ended, though it still answers kill(0)
    finally:
        child.wait()
    assert not sf.pid_alive(child.pid)
    # never a process group or a non-pid read from a damaged file
    assert not any(sf.pid_alive(p) for p in (0, -1, None, "1", 1.0))


def test_write_json_replaces_whole_files_and_read_json_defaults(sf, tmp_path):
    path = str(tmp_path / "state.json")
    sf.write_json(path, {"b": 1, "a": [1, 2]})
    assert open(path).read() == '{"a": [1, 2], "b": 1}'  # sorted keys: the supervisor's records
    sf.write_json(path, {"a": 1}, indent=1)
    assert open(path).read() == '{\n "a": 1\n}'  # the simulators' state files
    assert os.listdir(tmp_path) == ["state.json"]  # no temporary file left beside it
    assert sf.read_json(path) == {"a": 1}
    (tmp_path / "bad.json").write_text("{half")
    assert sf.read_json(str(tmp_path / "bad.json"), []) == []
    assert sf.read_json(str(tmp_path / "missing.json")) is None


def test_json_file_rereads_only_a_changed_file(sf, tmp_path):
    path = tmp_path / "processes.json"
    cached = sf.JsonFile(str(path))
    assert cached.read(default=[]) == []
    path.write_text('[{"pid": 1}]')
    first = cached.read()
    assert first == [{"pid": 1}] and cached.read() is first  # unchanged: the same object, no re-read
    path.write_text('[{"pid": 1}, {"pid": 2}]')
    assert cached.read() == [{"pid": 1}, {"pid": 2}]
    path.unlink()
    assert cached.read(default="gone") == "gone"


def test_gpu_processes_count_live_and_sticky_entries_only(sf):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    entries = [
        {"pid": os.getpid(), "gpu": 0, "vram_bytes": 5},
        {"pid": dead.pid, "gpu": 1, "vram_bytes": 6},  # ended: its memory is free again
        {"pid": 4000, "gpus": [2, 3], "sticky": True},  # the demo's load: no process behind it
        {"pid": os.getpid(), "gpu": "0"},  # not a GPU index
        "not an entry",
    ]
    expected = [(0, entries[0]), (2, entries[2]), (3, entries[2])]
    assert sf.gpu_processes(entries) == expected
    assert sf.gpu_processes({"processes": entries}) == expected
    assert sf.gpu_processes({"processes": "x"}) == [] and sf.gpu_processes(None) == []


def test_busy_workloads_are_sticky_made_up_processes(sf):
    out = sf.busy_workloads({"busy": [0, 5, -1, True, 2]}, 4000, (20, 27))
    assert [(e["pid"], e["gpu"], e["vram_bytes"] >> 30, e["sticky"]) for e in out] == [
        (4000, 0, 20, True),
        (4017, 5, 27, True),
        (4068, 2, 20, True),
    ]


def test_spec_and_clock_from_the_environment(sf, monkeypatch):
    monkeypatch.setenv(sf.SIM_SPEC_ENV, '{"gpu": "MI355X"}')
    assert sf.sim_spec() == {"gpu": "MI355X"}
    monkeypatch.setenv(sf.SIM_SPEC_ENV, "[1]")
    with pytest.raises(ValueError, match="^ROCM_CONSOLE_SIM_SPEC must be an object$"):
        sf.sim_spec()
    monkeypatch.setenv(sf.SIM_SPEC_ENV, "{")
    with pytest.raises(ValueError, match="^bad ROCM_CONSOLE_SIM_SPEC: "):
        sf.sim_spec()
    monkeypatch.delenv(sf.SIM_SPEC_ENV)
    assert sf.sim_spec() == {}
    monkeypatch.setenv(sf.SIM_TIME_ENV, "1700000000.5")
    assert sf.sim_now() == 1700000000.5
    monkeypatch.setenv(sf.SIM_TIME_ENV, "soon")
    assert abs(sf.sim_now() - time.time()) < 5  # not a number: the real clock
