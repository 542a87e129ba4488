"""serve_argv: `vllm serve` and `docker run` argv, overrides, env, redaction."""

from __future__ import annotations

import pytest

from console.core.model import ServePreset
from console.core.serve.argv import (
    DOCKER_RUN_FLAGS,
    ServeCommand,
    apply_overrides,
    build_docker_argv,
    build_serve_argv,
    looks_secret,
    redact,
)

TINY = ServePreset(
    name="tiny",
    model="/srv/models/tiny-llama",
    tp=1,
    args=("--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"),
    env=(("VLLM_CPU_KVCACHE_SPACE", "1"),),
)
BIG = ServePreset(
    name="llama-3.1-70b-fp8",
    model="amd/Llama-3.1-70B-Instruct-FP8-KV",
    tp=2,
    args=(
        "--kv-cache-dtype",
        "fp8",
        "--gpu_memory_utilization",
        "0.9",
        "--max-num-batched-tokens=65536",
        "--no-enable-prefix-caching",
    ),
    env=(("VLLM_ROCM_USE_AITER", "1"),),
    served_model_name="llama-70b",
    runtime="docker",
    image="rocm/vllm-dev:main",
)


def serve(preset=TINY, **kw):
    kw.setdefault("vllm", "vllm")
    kw.setdefault("port", 8000)
    kw.setdefault("gpus", list(range(preset.tp)))
    return build_serve_argv(preset, **kw)


# ---------------------------------------------------------------- host runtime


def test_host_argv_layout():
    cmd = serve(TINY, vllm="/opt/venv/bin/vllm", port=8011, host="127.0.0.1", gpus=[3])
    assert cmd.argv == (
        "/opt/venv/bin/vllm",
        "serve",
        "/srv/models/tiny-llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8011",
        "--tensor-parallel-size",
        "1",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--enforce-eager",
    )
    assert cmd.env == (("VLLM_CPU_KVCACHE_SPACE", "1"), ("CUDA_VISIBLE_DEVICES", "3"))
    assert isinstance(cmd, ServeCommand)


def test_vllm_prefix_is_split_like_a_shell_word_list():
    assert serve(vllm="uv run vllm").argv[:4] == ("uv", "run", "vllm", "serve")
    assert serve(vllm="'/opt/my venv/bin/vllm'").argv[:2] == ("/opt/my venv/bin/vllm", "serve")
    with pytest.raises(ValueError, match="empty vllm"):
        serve(vllm="  ")


def test_default_host_and_served_model_name():
    cmd = serve(BIG, gpus=[4, 5])
    assert cmd.argv[:11] == (
        "vllm",
        "serve",
        "amd/Llama-3.1-70B-Instruct-FP8-KV",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--served-model-name",
        "llama-70b",
    )
    assert cmd.argv[11:] == BIG.args
    assert dict(cmd.env)["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_extra_args_go_last():
    cmd = serve(extra_args=["--seed", "7", "--disable-log-stats"])
    assert cmd.argv[-3:] == ("--seed", "7", "--disable-log-stats")


@pytest.mark.parametrize(
    "bad",
    [
        ["--port", "9000"],
        ["--tensor_parallel_size=2"],
        ["-tp", "2"],
        ["--host=::"],
        ["--served-model-name", "x"],
        ["--api-key", "sk-1"],
        ["--hf-token=hf_x"],
    ],
)
def test_extra_args_cannot_override_owned_or_secret_flags(bad):
    with pytest.raises(ValueError):
        serve(extra_args=bad)


# ---------------------------------------------------------------- overrides


def test_override_replaces_a_spaced_value_in_place():
    cmd = serve(overrides={"max_model_len": "4096"})
    assert cmd.argv[9:] == ("--dtype", "float32", "--max-model-len", "4096", "--enforce-eager")


def test_override_keeps_the_presets_spelling_and_form():
    args = apply_overrides(BIG.args, {"gpu_memory_utilization": "0.95", "max-num-batched-tokens": "32768"})
    assert args == (
        "--kv-cache-dtype",
        "fp8",
        "--gpu_memory_utilization",
        "0.95",
        "--max-num-batched-tokens=32768",
        "--no-enable-prefix-caching",
    )


def test_override_appends_missing_flags_in_order():
    args = apply_overrides(("--a", "1"), {"max_num_seqs": "128", "block_size": "1"})
    assert args == ("--a", "1", "--max-num-seqs", "128", "--block-size", "1")


def test_override_true_makes_a_bare_flag_false_removes_it():
    args = apply_overrides(TINY.args, {"enforce_eager": "false", "async_scheduling": "true"})
    assert args == ("--dtype", "float32", "--max-model-len", "2048", "--async-scheduling")
    # a valued flag set to true becomes bare; "false" removes flag and value
    assert apply_overrides(("--x", "1", "--y=2"), {"x": "True", "y": "FALSE"}) == ("--x",)
    # removing something absent changes nothing
    assert apply_overrides(("--x", "1"), {"z": "false"}) == ("--x", "1")


def test_override_drops_repeats_and_the_negated_form():
    args = apply_overrides(("--m", "1", "--k", "--m=2"), {"m": "3"})
    assert args == ("--m", "3", "--k")
    args = apply_overrides(("--no-enable-prefix-caching", "--x"), {"enable_prefix_caching": "true"})
    assert args == ("--x", "--enable-prefix-caching")
    args = apply_overrides(("--enable-prefix-caching",), {"no_enable_prefix_caching": "true"})
    assert args == ("--no-enable-prefix-caching",)


def test_override_values_that_look_negative_or_json():
    args = apply_overrides(("--seed", "-1", "--compilation-config", '{"a": 1}'), {"seed": "-2"})
    assert args == ("--seed", "-2", "--compilation-config", '{"a": 1}')
    args = apply_overrides((), {"compilation_config": '{"cudagraph_mode": "FULL"}'})
    assert args == ("--compilation-config", '{"cudagraph_mode": "FULL"}')


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("port", "sets it from --port or the preset's port"),
        ("tensor_parallel_size", "tp"),
        ("tp", "tp"),
        ("-tp", "tp"),
        ("host", "the preset's host"),
        ("served_model_name", "served_model_name"),
        ("api_key", "api_key_env"),
        ("hf_token", "HF_TOKEN"),
        ("bad key", "not a flag name"),
        ("", "not a flag name"),
    ],
)
def test_refused_overrides(key, message):
    with pytest.raises(ValueError, match=message):
        serve(overrides={key: "1"})


def test_empty_override_value_is_refused():
    with pytest.raises(ValueError, match="empty value"):
        serve(overrides={"max_model_len": ""})


# ---------------------------------------------------------------- environment


def test_env_order_and_precedence():
    preset = ServePreset(name="p", model="m", env=(("A", "1"), ("CUDA_VISIBLE_DEVICES", "7"), ("B", "2")))
    cmd = serve(preset, gpus=[0], extra_env={"B": "20", "C": "3"})
    assert cmd.env == (("A", "1"), ("B", "20"), ("C", "3"), ("CUDA_VISIBLE_DEVICES", "0"))


def test_hip_visible_devices_only_when_given():
    assert "HIP_VISIBLE_DEVICES" not in dict(serve(gpus=[1]).env)
    given = serve(gpus=[1], extra_env={"HIP_VISIBLE_DEVICES": "1"})
    assert dict(given.env)["HIP_VISIBLE_DEVICES"] == "1"
    assert dict(given.env)["CUDA_VISIBLE_DEVICES"] == "1"


def test_no_gpus_leaves_cuda_visible_devices_alone():
    cmd = build_serve_argv(TINY, vllm="vllm", port=8000, gpus=[])
    assert cmd.env == (("VLLM_CPU_KVCACHE_SPACE", "1"),)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"port": 0}, "port 0"),
        ({"port": 70000}, "port 70000"),
        ({"port": True}, "port True"),
        ({"gpus": [1, 1]}, "GPU 1 is selected twice"),
        ({"gpus": [-1]}, "GPU index -1"),
        ({"host": ""}, "host"),
        ({"extra_env": {"BAD NAME": "1"}}, "not a valid environment variable name"),
    ],
)
def test_invalid_inputs(kw, message):
    with pytest.raises(ValueError, match=message):
        serve(**kw)


# ---------------------------------------------------------------- shell metacharacters


def test_metacharacters_stay_literal_argv_items():
    nasty_model = "/models/$(touch /tmp/pwned);`id` & x|y > z 'q' \"d\""
    nasty_value = "a b; rm -rf ~ && echo $HOME | tee /x"
    preset = ServePreset(
        name="nasty",
        model=nasty_model,
        args=("--chat-template", nasty_value, "--compilation-config", '{"k": "v; $(x)"}'),
        env=(("VLLM_X", "$(whoami); `id`"),),
    )
    cmd = serve(preset, gpus=[0], overrides={"tokenizer": "*.json ?[a]"}, extra_args=["--x", "\n;"])
    assert nasty_model in cmd.argv
    assert nasty_value in cmd.argv
    assert '{"k": "v; $(x)"}' in cmd.argv
    assert "*.json ?[a]" in cmd.argv
    assert "\n;" in cmd.argv
    assert dict(cmd.env)["VLLM_X"] == "$(whoami); `id`"
    assert all(isinstance(item, str) for item in cmd.argv)
    docker = build_docker_argv(preset, name="n", port=8000, gpus=[0], image="img")
    assert nasty_model in docker.argv and "VLLM_X=$(whoami); `id`" in docker.argv


def test_display_quotes_for_reading_only():
    cmd = serve(TINY, gpus=[0], extra_env={"HF_TOKEN": "hf_secret", "NOTE": "a b"})
    text = cmd.display()
    assert "hf_secret" not in text
    assert "HF_TOKEN=***" in text and "NOTE='a b'" in text
    assert text.endswith("--enforce-eager")


# ---------------------------------------------------------------- docker runtime


def test_docker_argv_layout():
    cmd = build_docker_argv(BIG, name="llama-a", port=8001, gpus=[2, 3])
    assert cmd.argv == (
        "docker",
        "run",
        "-d",
        "--name",
        "llama-a",
        "--ipc=host",
        "--network=host",
        "--group-add",
        "render",
        "--device=/dev/kfd",
        "--device=/dev/dri",
        "--security-opt",
        "seccomp=unconfined",
        "--cap-add=SYS_PTRACE",
        "--shm-size",
        "16G",
        "-e",
        "VLLM_ROCM_USE_AITER=1",
        "-e",
        "CUDA_VISIBLE_DEVICES=2,3",
        "-e",
        "HF_TOKEN",
        "rocm/vllm-dev:main",
        "vllm",
        "serve",
        "amd/Llama-3.1-70B-Instruct-FP8-KV",
        "--host",
        "0.0.0.0",
        "--port",
        "8001",
        "--tensor-parallel-size",
        "2",
        "--served-model-name",
        "llama-70b",
        *BIG.args,
    )
    assert cmd.env == ()
    assert set(DOCKER_RUN_FLAGS) <= set(cmd.argv)


def test_docker_secrets_by_name_only():
    cmd = build_docker_argv(
        BIG,
        name="llama-a",
        port=8001,
        gpus=[0, 1],
        extra_env={"HF_TOKEN": "hf_very_secret", "VLLM_API_KEY": "sk-123", "HF_HOME": "/data"},
        volumes=["/data:/data"],
    )
    joined = "\n".join(cmd.argv)
    assert "hf_very_secret" not in joined and "sk-123" not in joined
    assert ("-e", "HF_TOKEN") == cmd.argv[cmd.argv.index("HF_TOKEN") - 1 : cmd.argv.index("HF_TOKEN") + 1]
    assert "VLLM_API_KEY" in cmd.argv and "HF_HOME=/data" in cmd.argv
    assert ("-v", "/data:/data") == tuple(cmd.argv[cmd.argv.index("-v") : cmd.argv.index("-v") + 2])
    # the values travel in the docker client's environment, which docker copies
    assert cmd.env == (("HF_TOKEN", "hf_very_secret"), ("VLLM_API_KEY", "sk-123"))


def test_docker_options():
    preset = ServePreset(name="p", model="m", tp=1)
    cmd = build_docker_argv(
        preset,
        name="c1",
        port=8000,
        gpus=[0],
        image="rocm/vllm:latest",
        vllm="python3 -m vllm.entrypoints.cli.main",
        docker="sudo -n docker",
        shm_size="64G",
        pass_env=(),
    )
    assert cmd.argv[:4] == ("sudo", "-n", "docker", "run")
    assert "64G" in cmd.argv and "HF_TOKEN" not in cmd.argv
    i = cmd.argv.index("rocm/vllm:latest")
    assert cmd.argv[i + 1 : i + 6] == ("python3", "-m", "vllm.entrypoints.cli.main", "serve", "m")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"name": "-bad"}, "container name"),
        ({"name": "a b"}, "container name"),
        ({"image": None, "preset": ServePreset(name="p", model="m")}, "no docker image"),
        ({"shm_size": ""}, "shm size"),
        ({"pass_env": ["NOT VALID"]}, "not a valid environment"),
    ],
)
def test_docker_invalid(kw, message):
    preset = kw.pop("preset", BIG)
    args = {"name": "c", "port": 8000, "gpus": [0, 1]}
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        build_docker_argv(preset, **args)


# ---------------------------------------------------------------- redaction


def test_redact_argv():
    argv = [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "sk-1",
        "--hf-token=hf_2",
        "--api_key",
        "sk-3",
        "-e",
        "HF_TOKEN=hf_4",
        "-e",
        "HF_TOKEN",
        "--max-model-len",
        "4096",
        "TOKENIZERS_PARALLELISM=false",
        "DB_PASSWORD=pw",
    ]
    assert redact(argv) == (
        "vllm",
        "serve",
        "m",
        "--api-key",
        "***",
        "--hf-token=***",
        "--api_key",
        "***",
        "-e",
        "HF_TOKEN=***",
        "-e",
        "HF_TOKEN",
        "--max-model-len",
        "4096",
        "TOKENIZERS_PARALLELISM=false",
        "DB_PASSWORD=***",
    )


def test_redact_env_shapes():
    env = {"HF_TOKEN": "x", "OPENAI_API_KEY": "y", "AWS_SECRET_ACCESS_KEY": "z", "MAX_TOKENS": "5", "HOME": "/h"}
    assert redact(env) == {
        "HF_TOKEN": "***",
        "OPENAI_API_KEY": "***",
        "AWS_SECRET_ACCESS_KEY": "***",
        "MAX_TOKENS": "5",
        "HOME": "/h",
    }
    assert redact((("HF_TOKEN", "x"), ("A", "b"))) == (("HF_TOKEN", "***"), ("A", "b"))
    assert redact(()) == ()


def test_redact_text_and_commands():
    text = "HF_TOKEN=hf_abc vllm serve m --api-key sk-1 --hf-token=hf_x MAX_TOKENS=3"
    assert redact(text) == "HF_TOKEN=*** vllm serve m --api-key *** --hf-token=*** MAX_TOKENS=3"
    cmd = ServeCommand(("vllm", "--api-key", "k"), (("HF_TOKEN", "t"), ("A", "1")))
    assert redact(cmd) == ServeCommand(("vllm", "--api-key", "***"), (("HF_TOKEN", "***"), ("A", "1")))


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("VLLM_API_KEY", True),
        ("db-password", True),
        ("MY_SECRET", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("MAX_TOKENS", False),
        ("HF_HOME", False),
        ("VLLM_ROCM_USE_AITER", False),
        ("KEY", False),
    ],
)
def test_looks_secret(name, secret):
    assert looks_secret(name) is secret
