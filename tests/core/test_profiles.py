"""Profile loader: strict validation, one-line errors, merging, discovery."""

from __future__ import annotations

import math
import pickle
import textwrap
from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.model import SimulateSpec
from console.core.profiles import (
    demo_profile_path,
    discover_profile_paths,
    load_profile,
)

REPO = Path(__file__).resolve().parents[2]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, name: str = "lab.toml"):
    return load_profile([write(tmp_path, name, text)])


def fail(tmp_path: Path, text: str, name: str = "lab.toml") -> tuple[ProfileError, Path]:
    path = write(tmp_path, name, text)
    with pytest.raises(ProfileError) as info:
        load_profile([path])
    return info.value, path


# ---------------------------------------------------------------- malformed

# (id, profile text, line, table, key, fragment of the message)
MALFORMED = [
    (
        "unknown-node-key",
        """
        [nodes.mi300-a]
        host = "gpu-a.lab.example"
        prot = 22
        """,
        3,
        "nodes.mi300-a",
        "prot",
        "unknown key (expected one of: host, port, user,",
    ),
    (
        "port-string",
        """
        [nodes.a]
        host = "h"
        port = "22"
        """,
        3,
        "nodes.a",
        "port",
        'expected an integer, got string "22"',
    ),
    (
        "port-bool-is-not-int",
        """
        [nodes.a]
        host = "h"
        port = true
        """,
        3,
        "nodes.a",
        "port",
        "expected an integer, got boolean true",
    ),
    (
        "port-out-of-range",
        """
        [nodes.a]
        host = "h"

        port = 70000
        """,
        4,
        "nodes.a",
        "port",
        "must be 1..65535, got 70000",
    ),
    (
        "missing-host",
        """
        [nodes.other]
        host = "x"

        [nodes.a]
        user = "me"
        """,
        4,
        "nodes.a",
        "host",
        "missing required key",
    ),
    (
        "bad-transport",
        """
        [nodes.a]
        host = "h"
        transport = "telnet"
        """,
        3,
        "nodes.a",
        "transport",
        "must be one of: ssh, local",
    ),
    (
        "sudo-not-bool",
        """
        [nodes.a]
        host = "h"
        sudo = "yes"
        """,
        3,
        "nodes.a",
        "sudo",
        "expected true or false",
    ),
    (
        "empty-identity-file",
        """
        [nodes.a]
        host = "h"
        identity_file = ""
        """,
        3,
        "nodes.a",
        "identity_file",
        "must not be empty",
    ),
    (
        "host-with-space",
        """
        [nodes.a]
        host = "gpu a"
        """,
        2,
        "nodes.a",
        "host",
        "must not contain spaces",
    ),
    (
        "simulate-bad-gpu",
        """
        [nodes.a]
        transport = "local"
        simulate = { gpu = "MI250X" }
        """,
        3,
        "nodes.a",
        "simulate.gpu",
        "must be one of: MI300X, MI325X, MI355X",
    ),
    (
        "simulate-count-zero-subtable",
        """
        [nodes.a]
        transport = "local"

        [nodes.a.simulate]
        gpu = "MI300X"
        count = 0
        """,
        6,
        "nodes.a",
        "simulate.count",
        "must be 1..16, got 0",
    ),
    (
        "simulate-wrong-type",
        """
        [nodes.a]
        transport = "local"
        simulate = "yes"
        """,
        3,
        "nodes.a",
        "simulate",
        "expected true, false or a table",
    ),
    (
        "simulate-unknown-key",
        """
        [nodes.a]
        transport = "local"
        simulate.gpus = 8
        """,
        3,
        "nodes.a",
        "simulate.gpus",
        "did you mean 'gpu'?",
    ),
    (
        "simulate-cpx-nps2",
        """
        [nodes.a]
        transport = "local"
        simulate = { compute_partition = "CPX", memory_partition = "NPS2" }
        """,
        3,
        "nodes.a",
        "simulate.memory_partition",
        "CPX needs NPS1/NPS4, not NPS2",
    ),
    (
        "node-password-is-a-secret",
        """
        [nodes.a]
        host = "h"
        password = "hunter2"
        """,
        3,
        "nodes.a",
        "password",
        "secrets do not belong in profiles",
    ),
    (
        "serve-missing-model",
        """
        [serve.p]
        tp = 2
        """,
        1,
        "serve.p",
        "model",
        "missing required key",
    ),
    (
        "serve-tp-zero",
        """
        [serve.p]
        model = "m"
        tp = 0
        """,
        3,
        "serve.p",
        "tp",
        "must be >= 1, got 0",
    ),
    (
        "serve-tp-bool",
        """
        [serve.p]
        model = "m"
        tp = true
        """,
        3,
        "serve.p",
        "tp",
        "expected an integer, got boolean true",
    ),
    (
        "serve-args-string",
        """
        [serve.p]
        model = "m"
        args = "--max-model-len 8192"
        """,
        3,
        "serve.p",
        "args",
        "expected an array of strings",
    ),
    (
        "serve-args-item-int",
        """
        [serve.p]
        model = "m"
        args = [
            "--max-model-len",
            8192,
        ]
        """,
        3,
        "serve.p",
        "args",
        "item 2: expected a string, got integer 8192",
    ),
    (
        "serve-env-value-int",
        """
        [serve.p]
        model = "m"
        env = { VLLM_ROCM_USE_AITER = 1 }
        """,
        3,
        "serve.p",
        "env.VLLM_ROCM_USE_AITER",
        'expected a string, got integer 1; write "1"',
    ),
    (
        "serve-env-hf-token",
        """
        [serve.p]
        model = "m"
        env = { HF_TOKEN = "hf_abc" }
        """,
        3,
        "serve.p",
        "env.HF_TOKEN",
        "secrets do not belong in profiles; export it in the environment",
    ),
    (
        "serve-env-secret-subtable",
        """
        [serve.p]
        model = "m"

        [serve.p.env]
        VLLM_ROCM_USE_AITER = "1"
        AWS_SECRET_ACCESS_KEY = "x"
        """,
        6,
        "serve.p",
        "env.AWS_SECRET_ACCESS_KEY",
        "secrets do not belong in profiles",
    ),
    (
        "serve-env-password",
        """
        [serve.p]
        model = "m"
        env.DB_PASSWORD = "x"
        """,
        3,
        "serve.p",
        "env.DB_PASSWORD",
        "secrets do not belong in profiles",
    ),
    (
        "serve-env-bad-name",
        """
        [serve.p]
        model = "m"
        env = { "1BAD" = "x" }
        """,
        3,
        "serve.p",
        "env.1BAD",
        "not a valid environment variable name",
    ),
    (
        "serve-docker-without-image",
        """
        [serve.p]
        model = "m"
        runtime = "docker"
        """,
        1,
        "serve.p",
        "image",
        'runtime = "docker" needs an image',
    ),
    (
        "serve-image-without-docker",
        """
        [serve.p]
        model = "m"
        image = "rocm/vllm-dev:main"
        """,
        3,
        "serve.p",
        "image",
        'only used with runtime = "docker"',
    ),
    (
        "serve-bad-runtime",
        """
        [serve.p]
        model = "m"
        runtime = "podman"
        """,
        3,
        "serve.p",
        "runtime",
        "must be one of: host, docker",
    ),
    (
        "serve-tp-in-args",
        """
        [serve.p]
        model = "m"
        args = ["--tensor_parallel_size=8"]
        """,
        3,
        "serve.p",
        "args",
        "set tp = ... instead",
    ),
    (
        "serve-hf-token-flag",
        """
        [serve.p]
        model = "m"
        args = ["--hf-token", "hf_abc"]
        """,
        3,
        "serve.p",
        "args",
        "--hf-token: secrets do not belong in profiles",
    ),
    (
        "serve-dotted-name-unquoted",
        """
        [serve.llama-3.1-8b]
        model = "m"
        """,
        1,
        "serve.llama-3",
        "1-8b",
        'quoted: [serve."llama-3.1-8b"]',
    ),
    (
        "bench-bad-client",
        """
        [bench.b]
        client = "locust"
        """,
        2,
        "bench.b",
        "client",
        "must be one of: vllm-bench, benchmark_serving, guidellm, aiperf",
    ),
    (
        "bench-request-rate-word",
        """
        [bench.b]
        request_rate = "fast"
        """,
        2,
        "bench.b",
        "request_rate",
        'expected a number or "inf"',
    ),
    (
        "bench-request-rate-negative",
        """
        [bench.b]
        request_rate = -1
        """,
        2,
        "bench.b",
        "request_rate",
        "must be > 0",
    ),
    (
        "bench-concurrency-item",
        """
        [bench.b]
        max_concurrency = [1, "64"]
        """,
        2,
        "bench.b",
        "max_concurrency",
        "item 2: expected an integer",
    ),
    (
        "bench-concurrency-bool",
        """
        [bench.b]
        max_concurrency = true
        """,
        2,
        "bench.b",
        "max_concurrency",
        "expected an integer or an array of integers",
    ),
    (
        "bench-range-ratio",
        """
        [bench.b]
        range_ratio = 1.5
        """,
        2,
        "bench.b",
        "range_ratio",
        "must be >= 0 and < 1",
    ),
    (
        "bench-num-prompts-zero",
        """
        [bench.b]
        num_prompts = 0
        """,
        2,
        "bench.b",
        "num_prompts",
        "must be >= 1",
    ),
    (
        "bench-ignore-eos-int",
        """
        [bench.b]
        ignore_eos = 1
        """,
        2,
        "bench.b",
        "ignore_eos",
        "expected true or false, got integer 1",
    ),
    (
        "bench-input-len-float",
        """
        [bench.b]
        input_len = 4096.0
        """,
        2,
        "bench.b",
        "input_len",
        "expected an integer, got float 4096.0",
    ),
    (
        "bench-unknown-key",
        """
        [bench.b]
        dataset = "random"
        num_prompt = 10
        """,
        3,
        "bench.b",
        "num_prompt",
        "did you mean 'num_prompts'?",
    ),
    (
        "bench-percentile-metrics",
        """
        [bench.b]
        percentile_metrics = "ttft,foo"
        """,
        2,
        "bench.b",
        "percentile_metrics",
        "unknown metric 'foo'",
    ),
    (
        "bench-metric-percentiles",
        """
        [bench.b]
        metric_percentiles = "50,abc"
        """,
        2,
        "bench.b",
        "metric_percentiles",
        "percentiles in (0, 100]",
    ),
    (
        "keys-value-int",
        """
        [keys]
        quit = "q"
        partition = 7
        """,
        3,
        "keys",
        "partition",
        "expected a string, got integer 7",
    ),
    (
        "node-not-a-table",
        """
        [nodes]
        a = 1
        """,
        2,
        "nodes.a",
        None,
        "expected a table, got integer 1",
    ),
    (
        "node-bad-name",
        """
        [nodes."gpu a"]
        host = "h"
        """,
        1,
        'nodes."gpu a"',
        None,
        "invalid node name",
    ),
    (
        "unknown-top-level-table",
        """
        [nodes.a]
        host = "h"

        [servers.x]
        host = "h"
        """,
        4,
        "servers",
        None,
        "unknown table (expected one of: nodes, serve, bench, keys, prometheus, health, alert, models, alertmanager, store)",
    ),
    (
        "section-not-a-table",
        """
        nodes = 3
        """,
        1,
        "nodes",
        None,
        "expected a table, got integer 3",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "table", "key", "fragment"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_profile_names_file_table_and_key(tmp_path, text, line, table, key, fragment):
    err, path = fail(tmp_path, text)
    assert (err.file, err.line, err.table, err.key) == (str(path), line, table, key)
    assert fragment in err.message
    rendered = str(err)
    key_part = f" key '{key}':" if key else ":"
    assert rendered.startswith(f"{path}:{line}: [{table}]{key_part} ")
    assert rendered.endswith(err.message)
    assert "\n" not in rendered


def test_enough_malformed_cases():
    assert len(MALFORMED) >= 20


def test_top_level_secret_key(tmp_path):
    err, path = fail(tmp_path, 'hf_token = "hf_abc"\n')
    assert str(err) == (f"{path}:1: key 'hf_token': secrets do not belong in profiles; export it in the environment")


def test_secret_value_is_never_echoed(tmp_path):
    err, _ = fail(tmp_path, '[serve.p]\nmodel = "m"\nenv = { HF_TOKEN = "hf_very_secret" }\n')
    assert "hf_very_secret" not in str(err)


# ---------------------------------------------------------------- file-level errors


def test_bad_toml_syntax_reports_line(tmp_path):
    err, path = fail(tmp_path, '[nodes.a]\nhost = "h"\nport = = 22\n')
    assert err.line == 3
    assert err.table is None and err.key is None
    assert str(err).startswith(f"{path}:3: invalid TOML: ")
    assert "at line" not in str(err)  # the line is in the prefix already


def test_same_table_twice_is_a_toml_error(tmp_path):
    err, _ = fail(tmp_path, '[nodes.a]\nhost = "h"\n\n[nodes.a]\nhost = "i"\n')
    assert err.line == 4
    assert "invalid TOML" in err.message


def test_unterminated_string_at_end_of_file(tmp_path):
    err, path = fail(tmp_path, '[nodes.a]\nhost = "h\n')
    assert err.line == 2
    assert str(err).startswith(f"{path}:2: invalid TOML")


def test_unreadable_file(tmp_path):
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    with pytest.raises(ProfileError) as info:
        load_profile([folder])
    assert info.value.file == str(folder)
    assert str(info.value).startswith(f"{folder}: cannot read file: ")


def test_missing_file_in_load(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(ProfileError) as info:
        load_profile([missing])
    assert str(info.value).startswith(f"{missing}: cannot read file: ")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.toml"
    path.write_bytes(b'[nodes.a]\nhost = "caf\xe9"\n')
    with pytest.raises(ProfileError) as info:
        load_profile([path])
    assert str(info.value) == f"{path}:2: [nodes.a] key 'host': not UTF-8 text (save the file as UTF-8)"


def test_utf16_file_is_refused_and_a_utf8_bom_is_harmless(tmp_path):
    wide = tmp_path / "wide.toml"
    wide.write_bytes('[nodes.a]\nhost = "h"\n'.encode("utf-16"))  # Notepad's "Unicode": a BOM, then UTF-16
    with pytest.raises(ProfileError) as info:
        load_profile([wide])
    assert str(info.value) == f"{wide}:1: UTF-16 text (a UTF-16 byte order mark): save the file as UTF-8"
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b'\xef\xbb\xbf[nodes.a]\nhost = "h"\nprot = 1\n')
    with pytest.raises(ProfileError) as info:
        load_profile([bom])
    assert str(info.value).startswith(f"{bom}:3: [nodes.a] key 'prot': unknown key")  # lines still right


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("identity_file", "NOKEY", "no such file: "),
        ("known_hosts", "NOHOSTS", "no such file: "),
        ("identity_file", "DIR", "not a file: "),
    ],
)
def test_ssh_files_that_are_not_there_fail_at_load(tmp_path, key, value, message):
    target = {"NOKEY": tmp_path / "no-key", "NOHOSTS": tmp_path / "no-hosts", "DIR": tmp_path}[value]
    err, path = fail(tmp_path, f'[nodes.a]\nhost = "h"\n{key} = "{target}"\n')
    assert str(err) == f"{path}:3: [nodes.a] key '{key}': {message}{target}"


def test_identity_file_with_tilde_is_found_in_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_test").write_text("k")
    node = load(tmp_path, '[nodes.a]\nhost = "h"\nidentity_file = "~/.ssh/id_test"\n').nodes[0]
    assert node.identity_file == "~/.ssh/id_test"
    err, _ = fail(tmp_path, '[nodes.a]\nhost = "h"\nidentity_file = "~/.ssh/id_gone"\n', name="b.toml")
    assert err.key == "identity_file" and err.message == f"no such file: {tmp_path}/.ssh/id_gone"


@pytest.mark.parametrize(
    ("jump", "message"),
    [
        ("ops@bastion:99999", "port '99999' in string \"ops@bastion:99999\": expected 1..65535"),
        ("bastion:0", "port '0' in string \"bastion:0\": expected 1..65535"),
        ("bastion:ssh", "port 'ssh' in string \"bastion:ssh\": expected 1..65535"),
        ("bastion:", "port '' in string \"bastion:\": expected 1..65535"),
        ("@bastion", 'empty user in string "@bastion"'),
        ("ops@:22", 'no host in string "ops@:22"'),
        ("a:22,b:22", "one jump host only"),
        ("fe80::1", "an IPv6 address goes in brackets"),
        ("[fe80::1", "expected [address]:port"),
        ("[fe80::1]:70000", "port '70000'"),
    ],
)
def test_bad_jump_host(tmp_path, jump, message):
    err, path = fail(tmp_path, f'[nodes.a]\nhost = "h"\njump = "{jump}"\n')
    assert err.line == 3 and err.table == "nodes.a" and err.key == "jump"
    assert err.message.startswith(message), err.message


@pytest.mark.parametrize("jump", ["bastion", "ops@bastion", "ops@bastion.lab:2222", "[fe80::1]:22", "[::1]", "alias"])
def test_good_jump_hosts(tmp_path, jump):
    assert load(tmp_path, f'[nodes.a]\nhost = "h"\njump = "{jump}"\n').nodes[0].jump == jump


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-flag", "a" * 65, '"a/b"', '"a b"'])
@pytest.mark.parametrize("section", ["nodes", "serve", "bench"])
def test_path_unsafe_names_are_refused(tmp_path, name, section):
    body = {"nodes": 'host = "h"', "serve": 'model = "m"', "bench": 'dataset = "random"'}[section]
    quoted = name if name.startswith('"') else f'"{name}"'
    err, path = fail(tmp_path, f"[{section}.{quoted}]\n{body}\n")
    assert err.line == 1 and "name (letters, digits, '_', '.', '-'; a letter, digit or _ first; at most 64)" in str(err)


def test_duplicate_node_across_files_names_both(tmp_path):
    first = write(tmp_path, "a.toml", '[nodes.gpu]\nhost = "a"\n')
    second = write(tmp_path, "b.toml", '# second\n[nodes.gpu]\nhost = "b"\n')
    with pytest.raises(ProfileError) as info:
        load_profile([first, second])
    err = info.value
    assert (err.file, err.line, err.table, err.key) == (str(second), 2, "nodes.gpu", None)
    assert str(err) == f"{second}:2: [nodes.gpu]: node 'gpu' is also defined in {first}"


@pytest.mark.parametrize("section", ["serve", "bench"])
def test_duplicate_preset_across_files(tmp_path, section):
    body = 'model = "m"\n' if section == "serve" else ""
    first = write(tmp_path, "a.toml", f"[{section}.p]\n{body}")
    second = write(tmp_path, "b.toml", f"[{section}.p]\n{body}")
    with pytest.raises(ProfileError) as info:
        load_profile([first, second])
    assert str(first) in str(info.value) and str(second) in str(info.value)
    assert f"{section} preset 'p'" in info.value.message


# ---------------------------------------------------------------- valid


def test_empty_file_is_fine(tmp_path):
    path = write(tmp_path, "empty.toml", "")
    profile = load_profile([path])
    assert profile.nodes == () and profile.files == (str(path),)


def test_no_files_is_an_empty_profile():
    assert load_profile([]).nodes == ()


def test_full_node(tmp_path):
    (tmp_path / "id_ed25519").write_text("key\n")
    (tmp_path / "lab_known_hosts").write_text("hosts\n")
    profile = load(
        tmp_path,
        f"""
        [nodes.mi300-a]
        host = "gpu-a.lab.example"
        port = 2222
        user = "ops"
        identity_file = "{tmp_path / "id_ed25519"}"
        known_hosts = "{tmp_path / "lab_known_hosts"}"
        jump = "ops@bastion.lab.example:22"
        python = "/usr/bin/python3.11"
        sudo = true
        state_dir = "/var/tmp/rc"
        transport = "ssh"
        vllm = "/opt/venv/bin/vllm"
        """,
    )
    node = profile.node("mi300-a")
    assert node is not None
    assert (node.host, node.port, node.user, node.jump) == (
        "gpu-a.lab.example",
        2222,
        "ops",
        "ops@bastion.lab.example:22",
    )
    assert node.sudo is True and node.simulate is None
    assert node.vllm == "/opt/venv/bin/vllm"
    assert node.source == str(tmp_path / "lab.toml")


def test_local_node_defaults(tmp_path):
    node = load(tmp_path, '[nodes.here]\ntransport = "local"\n').nodes[0]
    assert node.host == "localhost"
    assert node.state_dir == "~/.rocm-console"  # the services layer decides for local


def test_simulate_true_false_and_case(tmp_path):
    profile = load(
        tmp_path,
        """
        [nodes.a]
        transport = "local"
        simulate = true
        [nodes.b]
        transport = "local"
        simulate = false
        [nodes.c]
        transport = "local"
        simulate = { gpu = "mi355x", compute_partition = "cpx", memory_partition = "nps4", count = 2, seed = 9 }
        """,
    )
    a, b, c = profile.nodes
    assert a.simulate == SimulateSpec()
    assert b.simulate is None
    assert c.simulate == SimulateSpec("MI355X", 2, "CPX", "NPS4", 9)


def test_serve_preset(tmp_path):
    preset = load(
        tmp_path,
        """
        [serve."llama-3.1-70b"]
        model = "amd/Llama-3.1-70B-Instruct-FP8-KV"
        tp = 8
        args = ["--max-model-len", "8192"]
        env = { VLLM_ROCM_USE_AITER = "1", TOKENIZERS_PARALLELISM = "false", HIP_FORCE_DEV_KERNARG = "1" }
        runtime = "docker"
        image = "rocm/vllm-dev:main"
        port = 8001
        served_model_name = "llama"
        """,
    ).serve_presets[0]
    assert preset.name == "llama-3.1-70b"
    assert preset.args == ("--max-model-len", "8192")
    assert preset.env == (
        ("VLLM_ROCM_USE_AITER", "1"),
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HIP_FORCE_DEV_KERNARG", "1"),
    )
    assert (preset.tp, preset.runtime, preset.image, preset.port) == (8, "docker", "rocm/vllm-dev:main", 8001)


def test_bench_preset_conversions(tmp_path):
    profile = load(
        tmp_path,
        """
        [bench.a]
        request_rate = "inf"
        max_concurrency = 32
        range_ratio = 0
        burstiness = 1
        [bench.b]
        request_rate = inf
        max_concurrency = [1, 2, 4]
        [bench.c]
        request_rate = 2
        """,
    )
    a, b, c = profile.bench_presets
    assert a.request_rate is None and a.max_concurrency == (32,)
    assert a.range_ratio == 0.0 and isinstance(a.range_ratio, float)
    assert a.burstiness == 1.0 and isinstance(a.burstiness, float)
    assert b.request_rate is None and b.max_concurrency == (1, 2, 4)
    assert c.request_rate == 2.0 and not math.isinf(c.request_rate)
    assert a.client == "vllm-bench" and a.num_prompts == 100  # model defaults kept


def test_merge_order_and_key_override(tmp_path):
    first = write(tmp_path, "a.toml", '[nodes.x]\nhost = "x"\n[keys]\nquit = "q"\nhelp = "?"\n')
    second = write(tmp_path, "b.toml", '[nodes.y]\nhost = "y"\n[keys]\nquit = "ctrl+q"\n')
    profile = load_profile([first, second])
    assert [n.name for n in profile.nodes] == ["x", "y"]
    assert [n.source for n in profile.nodes] == [str(first), str(second)]
    assert dict(profile.keys) == {"quit": "ctrl+q", "help": "?"}
    assert profile.files == (str(first), str(second))


def test_same_file_twice_is_loaded_once(tmp_path):
    path = write(tmp_path, "a.toml", '[nodes.x]\nhost = "x"\n')
    assert len(load_profile([path, str(path)]).nodes) == 1


def test_shipped_example_and_demo_load():
    example = load_profile([REPO / "profiles" / "example.toml"])
    assert [n.name for n in example.nodes] == ["mi300-a", "mi300-b"]
    assert all(n.host.endswith(".lab.example") for n in example.nodes)
    assert all(n.jump and "bastion.lab.example" in n.jump for n in example.nodes)
    assert example.serve_presets and example.bench_presets

    demo = load_profile([demo_profile_path()])
    specs = {n.name: (n.transport, n.simulate) for n in demo.nodes}
    assert specs == {
        "mi300x-spx": ("local", SimulateSpec("MI300X", 8, "SPX", "NPS1", 1, (0, 1, 2, 3), root=True)),
        "mi300x-cpx": (
            "local",
            SimulateSpec("MI300X", 8, "CPX", "NPS1", 2, (0, 3, 9, 10, 17, 26, 27, 28, 40, 63), root=True),
        ),
        "mi355x": ("local", SimulateSpec("MI355X", 8, "SPX", "NPS1", 3, (0, 1, 2, 3, 4, 5), root=True)),
        "h100": ("local", SimulateSpec("H100", 8, "SPX", "NPS1", 4, (0, 1, 2, 3), mig=(7,))),
    }


def test_demo_profile_path_is_in_repo():
    assert demo_profile_path() == REPO / "profiles" / "demo.toml"
    assert demo_profile_path().is_file()


# ---------------------------------------------------------------- error text


def test_error_text_without_line_table_or_key():
    assert str(ProfileError("a.toml", None, None, None, "boom")) == "a.toml: boom"
    assert str(ProfileError("a.toml", "nodes.x", None, 4, "boom")) == "a.toml:4: [nodes.x]: boom"
    assert str(ProfileError("a.toml", "nodes.x", "port", None, "boom")) == ("a.toml: [nodes.x] key 'port': boom")


def test_error_pickles():
    err = pickle.loads(pickle.dumps(ProfileError("a.toml", "keys", "q", 3, "boom")))
    assert (err.file, err.table, err.key, err.line, err.message) == ("a.toml", "keys", "q", 3, "boom")


# ---------------------------------------------------------------- search order


def test_discover_explicit_only(tmp_path):
    (tmp_path / "profiles").mkdir()
    write(tmp_path / "profiles", "lab.toml", "")
    given = write(tmp_path, "mine.toml", "")
    assert discover_profile_paths(["mine.toml"], tmp_path, None) == [given]
    assert discover_profile_paths([str(given)], tmp_path / "elsewhere", None) == [given]


def test_discover_explicit_missing_names_it(tmp_path):
    with pytest.raises(ProfileError) as info:
        discover_profile_paths(["absent.toml"], tmp_path, None)
    assert str(info.value) == "absent.toml: no such profile file"


def test_discover_cwd_then_config_dir(tmp_path):
    cwd, config = tmp_path / "repo", tmp_path / "config"
    (cwd / "profiles").mkdir(parents=True)
    config.mkdir()
    for name in ("zeta.toml", "alpha.toml", "example.toml", "demo.toml", "notes.txt"):
        write(cwd / "profiles", name, "")
    for name in ("b.toml", "a.toml", "demo.toml"):
        write(config, name, "")
    found = discover_profile_paths([], cwd, config)
    assert found == [
        cwd / "profiles" / "alpha.toml",
        cwd / "profiles" / "zeta.toml",
        config / "a.toml",
        config / "b.toml",
        config / "demo.toml",  # only the repo's shipped samples are skipped
    ]


def test_discover_without_config_dir(tmp_path):
    assert discover_profile_paths([], tmp_path, None) == []
    assert discover_profile_paths([], tmp_path, tmp_path / "missing") == []


def test_discover_config_dir_same_as_cwd_profiles(tmp_path):
    (tmp_path / "profiles").mkdir()
    lab = write(tmp_path / "profiles", "lab.toml", "")
    assert discover_profile_paths([], tmp_path, tmp_path / "profiles") == [lab]


def test_discover_in_repo_skips_samples():
    assert not any(p.name in ("example.toml", "demo.toml") for p in discover_profile_paths([], REPO, None))


def test_simulate_busy_must_be_gpu_indices(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[nodes.a]\ntransport = "local"\nsimulate = { gpu = "MI300X", busy = [0, "x"] }\n')
    with pytest.raises(ProfileError) as err:
        load_profile([path])
    assert "[nodes.a]" in str(err.value) and "simulate.busy" in str(err.value)
    path.write_text('[nodes.a]\ntransport = "local"\nsimulate = { gpu = "MI300X", busy = [1, 5] }\n')
    assert load_profile([path]).nodes[0].simulate.busy == (1, 5)


def test_the_checkouts_own_profiles_folder_loads_without_its_data_files(tmp_path):
    # Started from the checkout root with no profile of one's own: the shipped data files
    # (offline presets, reference numbers) are not profiles and must not be read as one.
    from console.core.profiles import SHIPPED_DATA

    root = Path(__file__).resolve().parents[2]
    paths = discover_profile_paths([], root, tmp_path)
    assert not {p.name for p in paths} & set(SHIPPED_DATA)
    load_profile(paths)  # no ProfileError


def test_allow_kill_foreign_is_a_node_key(tmp_path):
    path = write(tmp_path, "a.toml", '[nodes.x]\nhost = "x"\nallow_kill_foreign = true\n[nodes.y]\nhost = "y"\n')
    nodes = {n.name: n for n in load_profile([path]).nodes}
    assert nodes["x"].allow_kill_foreign is True and nodes["y"].allow_kill_foreign is False
    bad = write(tmp_path, "b.toml", '[nodes.x]\nhost = "x"\nallow_kill_foreign = "yes"\n')
    with pytest.raises(ProfileError) as err:
        load_profile([bad])
    assert "allow_kill_foreign" in str(err.value)
