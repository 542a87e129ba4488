"""The node agent's amd-smi / rocm-smi fallbacks against outputs captured on real GPUs.

tests/fixtures/hardware/INDEX.toml lists every capture with its source and the values
a correct parser must read off it. Whole-node captures run the real agent script as
a subprocess, as on a node without libamd_smi.so: the amdsmi module raises KeyError on
import and a fake ``amd-smi`` / ``rocm-smi`` first on PATH prints the capture for the
subcommand it answers (any other subcommand fails like a release that lacks it).
Captures of one subcommand alone are read by the agent's parser for that subcommand.

The shape-drift tests at the end change one field of a real capture in memory (the
fixture files are never edited) to the shapes other releases print.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from console.core.health_readings import from_amdsmi
from console.core.telemetry import parse_agent_line
from tests.agent.test_node_agent import load_agent_module

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"
INDEX = tomllib.loads((HARDWARE / "INDEX.toml").read_text())["capture"]

SAMPLE_FIELDS = (
    "util_pct",
    "umc_pct",
    "vram_used_mib",
    "vram_total_mib",
    "power_w",
    "power_cap_w",
    "temp_junction_c",
    "temp_mem_c",
    "gfx_clock_mhz",
    "mem_clock_mhz",
)
IDENTITY_FIELDS = ("bdf", "model", "serial", "vbios", "vram_total_mib", "compute_partition", "memory_partition")
STATIC_FACTS = IDENTITY_FIELDS + ("power_cap_w",)

pytestmark = pytest.mark.timeout(60)


def captures(run):
    return [pytest.param(c, id=c["id"]) for c in INDEX if c["run"] == run]


def capture_text(capture) -> str:
    return (HARDWARE / capture["file"]).read_text(encoding="utf-8")


def load_smi_cli():
    """smi_cli.py: the agent's amd-smi / rocm-smi parsers."""
    return load_agent_module("smi_cli")


FAKE_CLI = """\
#!{python}
# Prints the capture mapped to this call in answers.json, byte for byte.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
key = name if name == "rocm-smi" else "%s %s" % (name, args[0] if args else "")
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(" ".join([name] + args) + "\\n")
path = json.load(open(os.path.join(here, "answers.json"))).get(key)
if path is None:
    sys.stderr.write("%s: error: argument command: invalid choice: %r\\n" % (name, args[:1]))
    sys.exit(2)
sys.stdout.buffer.write(open(path, "rb").read())
"""


class Node:
    """A bin dir with fake vendor CLIs, and a broken amdsmi module, like a real node
    whose ROCm install has the CLIs but whose Python cannot load libamd_smi.so."""

    def __init__(self, tmp_path: Path):
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.answers: dict[str, str] = {}
        self.broken = tmp_path / "broken"
        self.broken.mkdir()
        (self.broken / "amdsmi.py").write_text(
            textwrap.dedent("""\
            print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory")
            raise KeyError("libamd_smi.so")
        """)
        )
        self.tmp = tmp_path

    def answer(self, call: str, path: Path) -> None:
        """``call`` is "rocm-smi" or "amd-smi <subcommand>"."""
        tool = call.split()[0]
        exe = self.bin / tool
        if not exe.exists():
            exe.write_text(FAKE_CLI.format(python=sys.executable))
            exe.chmod(0o755)
        self.answers[call] = str(path)
        (self.bin / "answers.json").write_text(json.dumps(self.answers))

    def answer_doc(self, call: str, doc) -> None:
        path = self.tmp / ("%s.json" % call.replace(" ", "_"))
        path.write_text(json.dumps(doc))
        self.answer(call, path)

    def calls(self) -> list[str]:
        log = self.bin / "calls.log"
        return log.read_text().splitlines() if log.exists() else []

    def run(self, count=3, health="0"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
        env["PATH"] = os.pathsep.join([str(self.bin), "/nonexistent"])
        proc = subprocess.run(
            [
                sys.executable,
                str(AGENT),
                "telemetry",
                "--count",
                str(count),
                "--interval",
                "0.1",
                "--health-interval",
                health,  # off unless a test reads health: the console's parser of it is o-console's
                "--amdsmi-path",
                str(self.broken),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=40,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        for line in proc.stdout.splitlines():  # every line is protocol the console accepts
            if json.loads(line).get("kind") != "health":
                parse_agent_line(line)
        return proc, lines


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def check(record, expected, fields, what):
    """Every field named in ``expected`` equals it; every other one of ``fields`` is null."""
    for field in fields:
        want = expected.get(field)
        got = record.get(field)
        if want is None:
            assert got is None, "%s %s: expected null (not in the capture), got %r" % (what, field, got)
        elif isinstance(want, str):
            assert got == want, "%s %s: expected %r, got %r" % (what, field, want, got)
        else:
            assert got == pytest.approx(want), "%s %s: expected %r, got %r" % (what, field, want, got)


# ------------------------------------------------------------------ whole-node captures


@pytest.mark.parametrize("capture", captures("agent"))
def test_agent_reads_every_gpu_of_the_capture(node, capture):
    for call in capture["answers"]:
        node.answer(call, HARDWARE / capture["file"])
    proc, lines = node.run(count=3)
    assert proc.returncode == 0, proc.stderr
    assert [line["kind"] for line in lines] == ["hello", "static", "sample", "sample", "sample"]
    hello = lines[0]
    assert hello["source"] == capture["expect_source"] and hello["simulated"] is False
    assert hello["note"].startswith("amdsmi module unavailable (KeyError: 'libamd_smi.so')")

    static = {g["index"]: g for g in lines[1]["gpus"]}
    samples = [{g["index"]: g for g in line["gpus"]} for line in lines[2:]]
    for expected in capture["expect_static"]:
        row = static[expected["index"]]
        check(row, expected, IDENTITY_FIELDS, "%s static GPU %d" % (capture["id"], expected["index"]))
        assert row["physical"] == expected["physical"]
        assert row["memory_caps"] == expected.get("memory_caps", [])
    for expected in capture["expect_sample"]:
        for seq, sample in enumerate(samples):
            what = "%s sample %d GPU %d" % (capture["id"], seq, expected["index"])
            check(sample[expected["index"]], expected, SAMPLE_FIELDS, what)
    # every GPU of the capture is a row, in both lines
    assert len(static) == len(samples[0]) == expected_gpu_count(capture)
    assert "warning" not in proc.stderr  # real output has no shape the parser cannot read


def expected_gpu_count(capture) -> int:
    doc = json.loads(capture_text(capture))
    if capture["tool"] == "rocm-smi":
        return sum(1 for key in doc if key.startswith("card"))
    return len(doc["gpu_data"] if isinstance(doc, dict) else doc)


def test_rocm_smi_capture_is_read_with_one_tick_command_and_one_static_command(node):
    node.answer("rocm-smi", HARDWARE / "rocm-smi_mi100_rocm602_telegraf.json")
    proc, _ = node.run(count=3)
    assert proc.returncode == 0
    calls = node.calls()
    assert sum("--showbus" in c for c in calls) == 1  # static facts once
    assert sum("--showuse" in c for c in calls) == 3  # one command per tick
    assert all(c.endswith("--json") for c in calls)


def test_processes_come_from_amd_smi_process_every_few_ticks(node):
    """The process capture (ROCm 6.2.0 changelog) on a node whose metric output is
    the ROCm 6.1.0 capture: both are GPU 0 of a pre-26 list-shape amd-smi."""
    node.answer("amd-smi metric", HARDWARE / "amd-smi_metric-p_rocm610_changelog.json")
    node.answer("amd-smi process", HARDWARE / "amd-smi_process_rocm620_changelog.json")
    proc, lines = node.run(count=6)
    assert proc.returncode == 0, proc.stderr
    samples = [line for line in lines if line["kind"] == "sample"]
    assert len(samples) == 6
    for sample in samples:
        (gpu,) = sample["gpus"]
        assert gpu["processes"] == [
            {"pid": 420157, "name": "TransferBench", "vram_mib": 0.0},
            {"pid": 420315, "name": "rvs", "vram_mib": 0.0},
        ]
    assert sum(c.startswith("amd-smi process") for c in node.calls()) == 2  # ticks 0 and 5


# ------------------------------------------------------------------ single-command captures


@pytest.mark.parametrize("capture", captures("static"))
def test_static_parser_reads_every_gpu_record(capture):
    smi = load_smi_cli()
    doc = smi.parse_json_output(capture_text(capture))  # the non-root banner is skipped
    records = smi.gpu_list(doc)
    assert len(records) >= len(capture["expect_static"])
    warnings = []
    facts = [smi.amd_static_facts(r, lambda field, value: warnings.append(field)) for r in records]
    for expected in capture["expect_static"]:
        check(facts[expected["index"]], expected, STATIC_FACTS, "%s GPU %d" % (capture["id"], expected["index"]))
    assert warnings == []


@pytest.mark.parametrize("capture", captures("process"))
def test_process_parser_reads_every_process(capture):
    smi = load_smi_cli()
    procs = smi.amd_processes(smi.parse_json_output(capture_text(capture)))
    want = {}
    for p in capture["expect_process"]:
        want.setdefault(p["gpu"], []).append({"pid": p["pid"], "name": p["name"], "vram_mib": p["vram_mib"]})
    assert procs == want


@pytest.mark.parametrize("capture", captures("partition"))
def test_partition_readers_read_every_gpu(node, capture):
    """Both agent readers of `amd-smi partition`: `partition show` on a CLI-only node
    (what a switch is verified against) and the telemetry sampler's static modes."""
    expected = capture["expect_partition"]
    for call in capture["answers"]:
        node.answer(call, HARDWARE / capture["file"])
    proc, line = partition_cmd(node, "show")
    assert proc.returncode == 0, line
    assert line["kind"] == "partitions"
    # no `amd-smi list` answers here, so each gpu_id is its own card
    assert line["gpus"] == [
        {
            "physical": e["gpu"],
            "compute_partition": e.get("compute_partition"),
            "memory_partition": e.get("memory_partition"),
            "memory_caps": e["memory_caps"],
            "logical_gpus": 1,
        }
        for e in expected
    ]
    assert "amd-smi partition --current --memory --json" in node.calls()

    smi = load_smi_cli()
    modes = smi.amd_partitions(smi.parse_json_output(capture_text(capture)))
    assert modes == dict(
        (e["gpu"], (e.get("compute_partition"), e.get("memory_partition"), e["memory_caps"])) for e in expected
    )


def test_every_indexed_file_exists_and_every_fixture_is_indexed():
    indexed = {c["file"] for c in INDEX}
    present = {p.name for p in HARDWARE.iterdir() if p.name != "INDEX.toml"}
    assert indexed == present
    for c in INDEX:
        # published captures name their URL; this project's own device runs name the run
        assert c["source"].startswith(("https://github.com/", "rocm-console device run ")), c["id"]
        for key in ("tool", "args", "date", "gpu_model", "versions", "partition", "origin"):
            assert c.get(key), "%s: %s missing" % (c["id"], key)


# ------------------------------------------------------------------ format drift

LILBEE_METRIC = HARDWARE / "amd-smi_metric_mi300x_rocm702_lilbee.json"


def lilbee_metric():
    return json.loads(LILBEE_METRIC.read_text())


def test_unknown_shape_is_a_null_field_and_one_warning_naming_it(node):
    doc = lilbee_metric()
    doc["gpu_data"][0]["usage"]["gfx_activity"] = ["N/A", 7]  # a per-XCC list where a leaf was
    node.answer_doc("amd-smi metric", doc)
    proc, lines = node.run(count=4)
    assert proc.returncode == 0, proc.stderr
    samples = [line["gpus"][0] for line in lines if line["kind"] == "sample"]
    assert len(samples) == 4
    assert all(s["util_pct"] is None for s in samples)
    assert all(s["power_w"] == 158 and s["temp_junction_c"] == 45 for s in samples)  # the rest still read
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, proc.stderr  # once, not once per tick
    assert "usage.gfx_activity" in warnings[0] and "amd-smi" in warnings[0]


def test_a_section_of_unknown_type_names_the_section(node):
    doc = lilbee_metric()
    doc["gpu_data"][0]["temperature"] = [45, 38]
    node.answer_doc("amd-smi metric", doc)
    proc, lines = node.run(count=2)
    assert proc.returncode == 0
    sample = lines[-1]["gpus"][0]
    assert sample["temp_junction_c"] is None and sample["temp_mem_c"] is None
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "cannot read temperature " in warnings[0]


@pytest.mark.parametrize(
    "usage, util",
    [
        ("N/A", None),  # secondary partitions print the whole section as N/A (ROCm/amdsmi#134)
        ("42", 42),  # a bare reading instead of the section
        ({"gfx_activity": 42}, 42),  # bare number leaf
        ({"gfx_activity": "42 %"}, 42),  # string with unit
        ({"gfx_activity": {"value": "N/A", "unit": "%"}}, None),
    ],
)
def test_usage_spellings(node, usage, util):
    doc = lilbee_metric()
    doc["gpu_data"][0]["usage"] = usage
    node.answer_doc("amd-smi metric", doc)
    proc, lines = node.run(count=1)
    assert proc.returncode == 0
    assert lines[-1]["gpus"][0]["util_pct"] == util
    assert "warning" not in proc.stderr


def test_amd_smi_6_0_names_are_read(node):
    """ROCm 6.0's amd-smi (amdsmi_commands.py before Feb 2024): clock sections "gfx" and
    "MEM", power current_power/power_limit as bare numbers, and the pre-26 top-level list."""
    doc = lilbee_metric()["gpu_data"]
    doc[0]["clock"] = {"gfx": {"clk": 1420, "max_clk": 2100}, "MEM": {"clk": 1300}}
    doc[0]["power"] = {"current_power": 512, "current_gfx_voltage": "N/A", "power_limit": 750}
    node.answer_doc("amd-smi metric", doc)
    proc, lines = node.run(count=1)
    sample = lines[-1]["gpus"][0]
    assert (sample["gfx_clock_mhz"], sample["mem_clock_mhz"]) == (1420, 1300)
    assert (sample["power_w"], sample["power_cap_w"]) == (512, 750)


@pytest.mark.parametrize("power", [{"average_power": "512 W"}, {"average_socket_power": {"value": 512, "unit": "W"}}])
def test_average_power_spellings_are_read(node, power):
    doc = lilbee_metric()
    doc["gpu_data"][0]["power"] = power
    node.answer_doc("amd-smi metric", doc)
    proc, lines = node.run(count=1)
    assert lines[-1]["gpus"][0]["power_w"] == 512


def test_partitioned_gpu_gets_each_partitions_load_from_the_primary_xcp_table(node):
    """DPX as ROCm/amdsmi#134 prints it: the primary carries usage.gfx_busy_inst.xcp_0/1
    (four XCCs each, then N/A), the secondary's usage is N/A."""
    primary = lilbee_metric()["gpu_data"][0]
    primary["usage"]["gfx_activity"] = {"value": 50, "unit": "%"}  # the whole card
    cell = lambda v: {"value": v, "unit": "%"}  # noqa: E731
    primary["usage"]["gfx_busy_inst"] = {
        "xcp_0": [cell(80), cell(80), cell(60), cell(60)] + ["N/A"] * 4,
        "xcp_1": [cell(20), cell(20), cell(20), cell(20)] + ["N/A"] * 4,
    }
    secondary = {"gpu": 1, "usage": "N/A", "power": {"socket_power": "N/A"}}
    node.answer_doc("amd-smi metric", {"gpu_data": [primary, secondary]})
    node.answer_doc(
        "amd-smi static",
        {"gpu_data": [{"gpu": 0, "bus": {"bdf": "0000:05:00.0"}}, {"gpu": 1, "bus": {"bdf": "0000:05:00.1"}}]},
    )
    proc, lines = node.run(count=1)
    assert proc.returncode == 0, proc.stderr
    assert [(g["physical"], g["partition_id"]) for g in lines[1]["gpus"]] == [(0, 0), (0, 1)]
    util = [g["util_pct"] for g in lines[2]["gpus"]]
    assert util == [70, 20]
    assert lines[2]["gpus"][1]["power_w"] is None


def test_idle_process_placeholder_is_an_empty_list_not_unknown():
    smi = load_smi_cli()
    doc = [
        {"gpu": 0, "process_list": [{"process_info": "No running processes detected"}]},
        {"gpu": 1, "process_list": "No running processes detected"},
    ]
    assert smi.amd_processes(doc) == {0: [], 1: []}
    newer = {
        "gpu_data": [
            {
                "gpu": 0,
                "process_list": [
                    {
                        "process_info": {
                            "name": "python3",
                            "pid": 7,
                            "memory_usage": {"vram_mem": {"value": 1073741824, "unit": "B"}},
                        }
                    }
                ],
            }
        ]
    }
    assert smi.amd_processes(newer) == {0: [{"pid": 7, "name": "python3", "vram_mib": 1024.0}]}


def test_metric_output_of_unknown_shape_falls_through_to_rocm_smi_with_the_reason(node):
    node.answer_doc("amd-smi metric", {"error": "query failed"})
    node.answer("rocm-smi", HARDWARE / "rocm-smi_mi300x_rocm702_lilbee.json")
    proc, lines = node.run(count=1)
    assert proc.returncode == 0
    hello = lines[0]
    assert hello["source"] == "rocm-smi"
    assert "amd-smi failed (amd-smi listed no GPU (unknown output shape: an object with keys error))" in hello["note"]


def test_renamed_rocm_smi_keys_are_read(node):
    card = copy.deepcopy(json.loads((HARDWARE / "rocm-smi_mi300x_rocm702_lilbee.json").read_text()))
    c0 = card["card0"]
    c0["Temperature (Sensor mem) (C)"] = c0.pop("Temperature (Sensor memory) (C)")
    c0["vram Total Memory (B)"] = c0.pop("VRAM Total Memory (B)")
    node.answer_doc("rocm-smi", card)
    proc, lines = node.run(count=1)
    sample = lines[-1]["gpus"][0]
    assert sample["temp_mem_c"] == 38 and sample["vram_total_mib"] == 196288


# ------------------------------------------------------------------ partition fallback
# No public JSON capture of `amd-smi list/partition` or `rocm-smi --showcomputepartition`
# from a partitioned node was found (docs/hardware.md, "Real captures"); these documents
# follow the shapes amd-smi's own CLI code writes (amdsmi_cli partition/list commands).


def cpx_list(gpus=2):
    return [
        {
            "gpu": g * 8 + p,
            "bdf": "0000:%02x:00.%d" % (0x0C + 0x16 * g, p),
            "uuid": "u%d" % g,
            "kfd_id": 100 + g * 8 + p,
            "node_id": 2 + g * 8 + p,
            "partition_id": p,
        }
        for g in range(gpus)
        for p in range(8)
    ]


def cpx_partition(gpus=2):
    return {
        "current_partition": [
            {
                "gpu_id": i,
                "memory": "NPS1",
                "accelerator_type": "CPX",
                "accelerator_profile_index": 3,
                "partition_id": str(i % 8),
            }
            for i in range(gpus * 8)
        ],
        "memory_partition": [
            {"gpu_id": i, "memory_partition_caps": "NPS1,NPS4", "current_memory_partition": "NPS1"}
            for i in range(gpus * 8)
        ],
        "partition_profiles": [],
        "partition_resources": [],
    }


def partition_cmd(node, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env["PATH"] = os.pathsep.join([str(node.bin), "/nonexistent"])
    proc = subprocess.run(
        [sys.executable, str(AGENT), "partition", *args, "--amdsmi-path", str(node.broken)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [json.loads(x) for x in proc.stdout.splitlines()]
    return proc, line


def test_partition_show_over_amd_smi_groups_logical_gpus_by_bdf(node):
    node.answer_doc("amd-smi list", cpx_list())
    node.answer_doc("amd-smi partition", cpx_partition())
    proc, line = partition_cmd(node, "show")
    assert proc.returncode == 0, line
    assert line["gpus"] == [
        {
            "physical": 0,
            "compute_partition": "CPX",
            "memory_partition": "NPS1",
            "memory_caps": ["NPS1", "NPS4"],
            "logical_gpus": 8,
        },
        {
            "physical": 1,
            "compute_partition": "CPX",
            "memory_partition": "NPS1",
            "memory_caps": ["NPS1", "NPS4"],
            "logical_gpus": 8,
        },
    ]


def test_partition_show_over_pre_26_amd_smi_reads_static_partition(node):
    node.answer_doc("amd-smi list", [{"gpu": 0, "bdf": "0000:0c:00.0"}, {"gpu": 1, "bdf": "0000:0c:00.1"}])
    node.answer_doc(
        "amd-smi static",
        [
            {"gpu": 0, "partition": {"compute_partition": "DPX", "memory_partition": "NPS1", "partition_id": 0}},
            {"gpu": 1, "partition": {"compute_partition": "N/A", "memory_partition": "N/A", "partition_id": 1}},
        ],
    )
    proc, line = partition_cmd(node, "show")
    assert line["gpus"] == [
        {"physical": 0, "compute_partition": "DPX", "memory_partition": "NPS1", "memory_caps": None, "logical_gpus": 2}
    ]
    assert "amd-smi static --partition --json" in node.calls()


def test_partition_answer_without_compute_modes_takes_them_from_static(node):
    """The real memory-only answer (MI355X `partition -m`) on an amd-smi whose static
    output still carries the partition section: compute from static, memory and caps
    from the partition command, each GPU once."""
    node.answer("amd-smi partition", HARDWARE / "amd-smi_partition-m_mi355x_spx_fishman.json")
    node.answer_doc(
        "amd-smi static",
        [
            {"gpu": g, "partition": {"compute_partition": "SPX", "memory_partition": "NPS4", "partition_id": 0}}
            for g in range(8)
        ],
    )
    proc, line = partition_cmd(node, "show")
    assert proc.returncode == 0, line
    assert [(g["compute_partition"], g["memory_partition"], g["memory_caps"]) for g in line["gpus"]] == [
        ("SPX", "NPS1", ["NPS1", "NPS2"])
    ] * 8  # the partition command's memory mode wins
    assert "amd-smi static --partition --json" in node.calls()


def test_partition_show_over_rocm_smi(node):
    node.answer_doc(
        "rocm-smi",
        {
            "card0": {"PCI Bus": "0000:0C:00.0", "Compute Partition": "DPX", "Memory Partition": "NPS1"},
            "card1": {"PCI Bus": "0000:0C:00.1", "Compute Partition": "DPX", "Memory Partition": "NPS1"},
            "card2": {"PCI Bus": "0000:22:00.0", "Compute Partition": "SPX", "Memory Partition": "NPS1"},
        },
    )
    proc, line = partition_cmd(node, "show")
    assert [(g["compute_partition"], g["logical_gpus"]) for g in line["gpus"]] == [("DPX", 2), ("SPX", 1)]


def test_partition_set_over_amd_smi_verifies_from_a_fresh_read(node, tmp_path):
    done = tmp_path / "set.txt"
    done.write_text("GPU: 0\n    ACCELERATOR_PARTITION: Successfully set accelerator partition to CPX\n")
    node.answer("amd-smi set", done)
    node.answer_doc("amd-smi list", cpx_list(1))
    node.answer_doc("amd-smi partition", cpx_partition(1))
    proc, line = partition_cmd(node, "set", "--gpus", "0", "--compute", "CPX")
    assert proc.returncode == 0, line
    assert line["kind"] == "partitions" and line["logical_gpus"] == 8
    assert "amd-smi set -g 0 -C CPX" in node.calls()
    # the mode read back is checked: a GPU still in SPX after the switch is an error
    node.answer_doc(
        "amd-smi partition",
        {"current_partition": [{"gpu_id": i, "memory": "NPS1", "accelerator_type": "SPX"} for i in range(8)]},
    )
    proc, line = partition_cmd(node, "set", "--gpus", "0", "--compute", "CPX")
    assert proc.returncode == 4 and line["kind"] == "error"
    assert "GPU 0 reports SPX/NPS1 after the switch" in line["message"]


def test_partition_set_whose_mode_cannot_be_read_back_is_unverified_not_passed(node, tmp_path):
    done = tmp_path / "set.txt"
    done.write_text("GPU: 0\n    ACCELERATOR_PARTITION: Successfully set accelerator partition to CPX\n")
    node.answer("amd-smi set", done)
    node.answer_doc("amd-smi list", cpx_list(1))
    # the read-back answers with the memory table only and static has no partition: compute mode unknown
    node.answer_doc(
        "amd-smi partition",
        {
            "memory_partition": [
                {"gpu_id": i, "memory_partition_caps": "NPS1,NPS4", "current_memory_partition": "NPS1"}
                for i in range(8)
            ]
        },
    )
    node.answer_doc("amd-smi static", {"gpu_data": []})
    proc, line = partition_cmd(node, "set", "--gpus", "0", "--compute", "CPX")
    assert proc.returncode == 0, line
    assert line["unverified"] == [0]


# ------------------------------------------------------------------ health from the CLI captures

CLI_HEALTH_SECTIONS = {  # amdsmi result key -> the amd-smi metric section it comes from
    "amdsmi_get_gpu_total_ecc_count": "ecc",
    "amdsmi_get_gpu_ecc_count": "ecc_blocks",
}


@pytest.mark.parametrize("capture", captures("agent"))
def test_health_from_a_cli_capture_is_only_what_the_cli_printed(node, capture):
    """The fallbacks' health lines carry what the capture printed, in the library's shape,
    and nothing it did not: these captures print no ecc, ecc_blocks, pcie or energy
    section, so every result is absent and energy_j null (never a 0 made up)."""
    for call in capture["answers"]:
        node.answer(call, HARDWARE / capture["file"])
    proc, lines = node.run(count=3, health="0.1")
    assert proc.returncode == 0, proc.stderr
    health = [line for line in lines if line["kind"] == "health"]
    samples = [line for line in lines if line["kind"] == "sample"]
    assert len(samples) == 3
    if capture["tool"] == "rocm-smi":
        assert health == []  # rocm-smi's default output has no health section: no line at all
        return
    doc = json.loads(capture_text(capture))
    records = doc["gpu_data"] if isinstance(doc, dict) else doc
    entries = [g for line in health for g in line["gpus"]]
    assert {g["physical"] for g in entries} == set(range(expected_gpu_count(capture)))
    for entry in entries:
        assert (entry["vendor"], entry["source"], entry["events"]) == ("amd", "amd-smi", [])
        record = records[entry["physical"]]
        for key, section in CLI_HEALTH_SECTIONS.items():
            assert (key in entry["results"]) == isinstance(record.get(section), dict), (key, section)
        assert ("amdsmi_get_pcie_info" in entry["results"]) == isinstance(record.get("pcie"), dict)
    for sample in samples:
        for gpu in sample["gpus"]:
            assert gpu["energy_j"] is None and gpu["throttled"] is None


def test_cli_health_maps_the_cli_names_to_the_library_shape():
    """amd-smi prints the library's values under its own names (amdsmi_commands.py of
    ROCm/amdsmi: ecc.total_*_count, ecc_blocks.<BLOCK>, pcie.width / speed in GT/s /
    replay_count; static's bus.max_pcie_*); the record here is built with those names
    (no real capture with these sections is public), the bus is the real MI300X one."""
    smi = load_smi_cli()
    static = json.loads((HARDWARE / "amd-smi_static_mi300x_rocm721_dellai_root.json").read_text())
    bus = static["gpu_data"][0]["bus"]
    record = {
        "gpu": 0,
        "ecc": {"total_correctable_count": 4, "total_uncorrectable_count": 1, "total_deferred_count": "N/A"},
        "ecc_blocks": {"UMC": {"correctable_count": 4, "uncorrectable_count": 1, "deferred_count": 0}, "GFX": "N/A"},
        "pcie": {"width": 8, "speed": {"value": 32, "unit": "GT/s"}, "replay_count": 2, "bandwidth": "N/A"},
        "energy": {"total_energy_consumption": {"value": 1234.5, "unit": "J"}},
    }
    results = smi.amd_cli_health(record, bus)
    assert results == {
        "amdsmi_get_gpu_total_ecc_count": {"correctable_count": 4, "uncorrectable_count": 1},
        "amdsmi_get_gpu_ecc_count": {"UMC": {"correctable_count": 4, "uncorrectable_count": 1, "deferred_count": 0}},
        "amdsmi_get_pcie_info": {
            "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000},
            "pcie_metric": {"pcie_width": 8, "pcie_replay_count": 2, "pcie_speed": 32000},
        },
    }
    reading = from_amdsmi(0, 0.0, results)
    assert (reading.ecc_uncorrectable, reading.ecc_deferred) == (1, None)
    assert (reading.pcie_width, reading.pcie_width_max, reading.pcie_gen, reading.pcie_gen_max) == (8, 16, 5, 5)
    assert smi.amd_cli_energy_j(record) == 1234.5
    assert smi.amd_cli_energy_j({"energy": {"total_energy_consumption": {"value": 5, "unit": "furlongs"}}}) is None
    assert smi.amd_cli_health({"gpu": 0, "ecc": "N/A", "pcie": "N/A"}) == {}
