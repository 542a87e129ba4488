"""Shipping the agent: uploaded once by content hash, paths taken literally, ~ expanded on the node."""

import ast
from pathlib import Path

import pytest

from console.services.agent_bundle import expand_home, install_agent, install_local_agent
from console.transport.base import TransportError
from console.transport.local import LocalTransport


async def test_upload_once_then_reuse(sim_node, tmp_path):
    node = sim_node("a")
    t = LocalTransport("a")
    cmd = await install_agent(t, node)
    agent = tmp_path / "state" / "agent"
    [bundle] = list(agent.iterdir())
    assert (bundle / "node_agent.py").is_file() and (bundle / "sim" / "amdsmi" / "__init__.py").is_file()
    mtime = (bundle / "node_agent.py").stat().st_mtime_ns
    again = await install_agent(t, node)
    assert again == cmd and (bundle / "node_agent.py").stat().st_mtime_ns == mtime
    assert dict(cmd.env)["ROCM_CONSOLE_SIM_DIR"].endswith("/sim/a")


async def test_state_dir_with_shell_metacharacters_is_literal(sim_node, tmp_path):
    marker = tmp_path / "pwned"
    weird = tmp_path / f"st ate$(touch {marker})'\""
    node = sim_node("a", state_dir=str(weird))
    cmd = await install_agent(LocalTransport("a"), node)
    assert cmd.agent_path.startswith(str(weird))
    assert not marker.exists()
    result = await LocalTransport("a").run(cmd.argv("telemetry", "--count", "1"), env=cmd.env_dict(), timeout=30)
    assert result.ok and '"kind":"sample"' in result.stdout


def test_expand_home():
    assert expand_home("~/.rocm-console", "/home/u", "n") == "/home/u/.rocm-console"
    assert expand_home("/srv/rc/", "/home/u", "n") == "/srv/rc"
    with pytest.raises(TransportError, match="n: cannot find the home directory"):
        expand_home("~/x", "", "n")


async def test_a_failed_upload_is_one_clear_error_and_stops_the_rest(sim_node, tmp_path):
    # Files after the first go side by side; one failing must surface as itself.
    class Flaky(LocalTransport):
        def __init__(self):
            super().__init__("a")
            self.started = []

        async def upload(self, data, remote_path, *, mode=0o644):
            self.started.append(remote_path)
            if remote_path.endswith("/partitions.py"):
                raise TransportError("a: upload to partitions.py failed: disk full", "command")
            await super().upload(data, remote_path, mode=mode)

    t = Flaky()
    with pytest.raises(TransportError, match="^a: upload to partitions.py failed: disk full$"):
        await install_agent(t, sim_node("a"))
    assert t.started[0].endswith("/node_agent.py")  # alone first: it settles SFTP or sh
    cmd = await install_agent(LocalTransport("a"), sim_node("a"))  # a later contact completes the bundle
    assert Path(cmd.agent_path).parent.joinpath("partitions.py").is_file()


async def test_every_folder_gets_a_real_copy_of_the_shared_files(sim_node, tmp_path):
    # lifeline.py and statefiles.py are git symlinks in the checkout; each folder the node imports
    # from (the agent, the simulated amdsmi package, the simulated NVML's folder, the simulated vllm)
    # must hold the file itself.
    cmd = await install_agent(LocalTransport("a"), sim_node("a"))
    bundle = Path(cmd.bundle_dir)
    for shared, places in (
        ("lifeline.py", ("sim/vllm/lifeline.py",)),
        ("statefiles.py", ("sim/amdsmi/statefiles.py", "sim/nvidia/statefiles.py", "sim/vllm/statefiles.py")),
    ):
        for place in places:
            copy = bundle / place
            assert not copy.is_symlink() and copy.read_bytes() == (bundle / shared).read_bytes(), place
    result = await LocalTransport("a").run(cmd.argv("probe"), env=cmd.env_dict(), timeout=30)
    assert result.ok and '"amdsmi":"7.0.2+sim"' in result.stdout, result.stderr


async def test_an_nvidia_sim_node_reads_the_simulated_nvml_from_its_own_folder(sim_node):
    cmd = await install_agent(LocalTransport("h"), sim_node("h", gpu="H100", count=2))
    assert [Path(p).name for p in cmd.amdsmi_paths] == ["nvidia"]
    assert sorted(p.name for p in Path(cmd.amdsmi_paths[0]).iterdir()) == [
        "faults.py",
        "nvml_errors.py",
        "pynvml.py",
        "statefiles.py",
    ]
    result = await LocalTransport("h").run(cmd.argv("telemetry", "--count", "1"), env=cmd.env_dict(), timeout=30)
    assert result.ok and '"source":"nvml","simulated":true' in result.stdout, result.stderr


def test_the_bundle_holds_every_module_the_agent_imports_by_name(sim_node, tmp_path):
    # The agent's modules import each other by file name on the node: one left out of the
    # bundle is an ImportError there (at start, or only when a CLI fallback is first tried).
    cmd = install_local_agent(sim_node("a"))
    bundle = Path(cmd.bundle_dir)
    source = Path(__file__).resolve().parents[2] / "console" / "agent"
    siblings = {p.stem for p in source.glob("*.py")}
    needed = set()
    for shipped in bundle.glob("*.py"):
        for node in ast.walk(ast.parse(shipped.read_text())):
            if isinstance(node, ast.Import):
                needed.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                needed.add(node.module)
    missing = sorted(name for name in needed & siblings if not (bundle / f"{name}.py").is_file())
    assert "smi_cli" in needed and missing == []
