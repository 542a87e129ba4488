"""Doctor records: the agent's line parsed strictly, the console's own rules, rendering, exit rule."""

import json

import pytest

from console.core.doctor import (
    DoctorCheck,
    DoctorOutputError,
    NodeDoctor,
    down_node,
    exit_code,
    link_check,
    parse_doctor_output,
    render_text,
    to_json,
    vllm_env_checks,
)


def line(checks, facts=None, kind="doctor"):
    return json.dumps({"kind": kind, "checks": checks, "facts": {} if facts is None else facts})


def chk(id_="numa_balancing", level="ok", detail="kernel.numa_balancing = 0", fix=""):
    return {"id": id_, "title": "NUMA balancing", "level": level, "detail": detail, "fix": fix}


def test_parse_skips_other_lines_and_keeps_order():
    stdout = (
        "warning: noise\n"
        + line([chk(), chk("kfd", "fail", "no /dev/kfd", "modprobe amdgpu")], {"rocm": "7.0.2"})
        + "\n"
    )
    checks, facts = parse_doctor_output(stdout)
    assert [c.id for c in checks] == ["numa_balancing", "kfd"]
    assert checks[1] == DoctorCheck("kfd", "NUMA balancing", "fail", "no /dev/kfd", "modprobe amdgpu")
    assert facts == {"rocm": "7.0.2"}


@pytest.mark.parametrize(
    "stdout,message",
    [
        ("", "no doctor line in the agent's output"),
        (
            '{"kind": "error", "message": "unrecognized arguments: --sudo"}',
            "the agent said: unrecognized arguments: --sudo",
        ),
        (line([]), "doctor line without checks"),
        (line([chk(level="maybe")]), "check 0 (numa_balancing): unknown level 'maybe'"),
        (line([{"id": "x", "title": "X", "level": "ok"}]), "check 0: 'detail' missing or not text"),
        (line([chk(fix=3)]), "check 0 (numa_balancing): 'fix' is not text"),
        (json.dumps({"kind": "doctor", "checks": [chk()]}), "doctor line without facts"),
    ],
)
def test_parse_rejects_what_it_cannot_trust(stdout, message):
    with pytest.raises(DoctorOutputError) as info:
        parse_doctor_output(stdout)
    assert str(info.value) == message


def node(name, *levels):
    return NodeDoctor(
        name,
        tuple(DoctorCheck(f"c{i}", f"check {i}", lv, f"detail {i}", f"fix {i}") for i, lv in enumerate(levels)),
        {"rocm": "7.0.2"},
    )


def test_exit_rule_and_levels():
    assert exit_code([node("a", "ok", "warn"), node("b", "ok")]) == 0
    assert exit_code([node("a", "ok", "warn"), node("b", "fail", "ok")]) == 1
    assert node("a", "ok", "warn").level == "warn" and node("a", "warn", "fail").level == "fail"
    down = down_node("gpu-7", "connection", "gpu-7: cannot reach 10.0.0.7:22: connection refused", "check host")
    assert down.level == "fail" and down.checks[0].detail.startswith("gpu-7: cannot reach")
    assert down_node("gpu-7", "agent", "python3 not found").checks[0].detail == "gpu-7: python3 not found"


def test_text_shows_fixes_only_for_problems():
    text = render_text([node("a", "ok", "warn"), node("b", "fail")])
    lines = text.splitlines()
    assert lines[0] == "a  WARN  (1 warn)"
    assert lines[1].split() == ["ok", "check", "0", "detail", "0"]
    assert lines[2].split()[:2] == ["warn", "check"]
    assert lines[3].strip() == "fix: fix 1"  # an ok line needs no fix: none after line 1
    assert "b  FAIL  (1 fail)" in lines
    assert lines[-1] == "2 nodes: 1 failing (b), 1 with warnings (a)"


def test_json_document():
    doc = to_json([node("a", "ok", "warn")])
    assert doc["level"] == "warn"
    [a] = doc["nodes"]
    assert a["counts"] == {"ok": 1, "warn": 1, "fail": 0}
    assert a["checks"][1] == {"id": "c1", "title": "check 1", "level": "warn", "detail": "detail 1", "fix": "fix 1"}
    assert a["facts"] == {"rocm": "7.0.2"}
    json.dumps(doc)


def test_environment_names_the_nodes_vllm_ignores():
    facts = {"vllm": "0.12.0", "env": {"VLLM_USE_TRITON_FLASH_ATTN": "0", "HIP_FORCE_DEV_KERNARG": "1"}}
    [warn] = vllm_env_checks(facts)
    assert warn.level == "warn" and warn.id == "env.vllm_version"
    assert warn.detail.startswith("env VLLM_USE_TRITON_FLASH_ATTN is gone in vLLM 0.12.0 (last in 0.11)")
    assert vllm_env_checks({"vllm": "0.10.1", "env": {"VLLM_USE_TRITON_FLASH_ATTN": "0"}}) == []
    assert vllm_env_checks({"vllm": None, "env": None}) == []


def test_link_line_says_when_files_go_through_sh():
    assert "SFTP" not in link_check("SSH to a@h:22", None).detail
    check = link_check("SSH to a@h:22", "sshd refused the sftp subsystem request (no Subsystem sftp in sshd_config)")
    assert check.level == "ok" and "files go through sh on a command channel" in check.detail
