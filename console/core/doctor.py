"""`rocm-console doctor`: records, the rules the console adds, and rendering.

The node agent's doctor mode (console/agent/doctor.py) writes one ``doctor``
line: checks (ok / warn / fail, each with its fix) and raw facts. Here that
line becomes records; the console adds what only it knows (how it reached the
node, vLLM environment names the node's vLLM does not know) and renders a
table or JSON. Exit rule: any fail -> 1, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.core.node_json import NodeJsonError, loads
from console.core.serve.rules import version_warnings
from console.core.text import clip, printable

OK, WARN, FAIL = "ok", "warn", "fail"
LEVELS = (OK, WARN, FAIL)
_RANK = {OK: 0, WARN: 1, FAIL: 2}


class DoctorOutputError(ValueError):
    """The agent's doctor line is missing or malformed (one line saying what)."""


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    id: str  # stable name: "source.amdsmi", "numa_balancing", "env.HIP_FORCE_DEV_KERNARG", ...
    title: str
    level: str  # ok | warn | fail
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class NodeDoctor:
    name: str
    checks: tuple[DoctorCheck, ...]
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def level(self) -> str:
        return worst(c.level for c in self.checks)

    def count(self, level: str) -> int:
        return sum(1 for c in self.checks if c.level == level)


def worst(levels: Iterable[str]) -> str:
    return max(levels, key=lambda lv: _RANK.get(lv, 2), default=OK)


def exit_code(nodes: Sequence[NodeDoctor]) -> int:
    """0 when every line is ok or warn, 1 when any fails."""
    return 1 if any(n.level == FAIL for n in nodes) else 0


def down_node(name: str, title: str, reason: str, fix: str = "") -> NodeDoctor:
    """A node the doctor could not run on: one fail line naming it and why."""
    detail = reason if reason.startswith(f"{name}:") else f"{name}: {reason}"
    return NodeDoctor(name, (DoctorCheck("connection", title, FAIL, detail, fix),))


# ------------------------------------------------------------------ parsing


def _check(obj: Any, n: int) -> DoctorCheck:
    if not isinstance(obj, dict):
        raise DoctorOutputError(f"check {n} is not an object")
    values = {}
    for key in ("id", "title", "level", "detail"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise DoctorOutputError(f"check {n}: {key!r} missing or not text")
        values[key] = printable(value)
    if values["level"] not in LEVELS:
        raise DoctorOutputError(f"check {n} ({values['id']}): unknown level {clip(values['level'], 40)!r}")
    fix = obj.get("fix") or ""
    if not isinstance(fix, str):
        raise DoctorOutputError(f"check {n} ({values['id']}): 'fix' is not text")
    return DoctorCheck(values["id"], values["title"], values["level"], values["detail"], printable(fix))


def parse_doctor_output(stdout: str) -> tuple[tuple[DoctorCheck, ...], dict[str, Any]]:
    """(checks, facts) from the agent's stdout; DoctorOutputError when there is no usable line."""
    bad: NodeJsonError | None = None
    for line in stdout.splitlines():
        if not line.lstrip().startswith("{"):
            continue  # not the agent's (a warning some library printed)
        try:
            obj = loads(line)
        except NodeJsonError as exc:
            bad = bad or exc  # said if no doctor line follows
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("kind") == "error":
            raise DoctorOutputError(f"the agent said: {printable(clip(str(obj.get('message')), 300))}")
        if obj.get("kind") != "doctor":
            continue
        checks, facts = obj.get("checks"), obj.get("facts")
        if not isinstance(checks, list) or not checks:
            raise DoctorOutputError("doctor line without checks")
        if not isinstance(facts, dict):
            raise DoctorOutputError("doctor line without facts")
        return tuple(_check(c, n) for n, c in enumerate(checks)), facts
    if bad is not None:
        raise DoctorOutputError(f"no usable doctor line in the agent's output ({bad})")
    raise DoctorOutputError("no doctor line in the agent's output")


# ------------------------------------------------------------------ console-side rules


def vllm_env_checks(facts: Mapping[str, Any]) -> list[DoctorCheck]:
    """Environment names in the node's login environment that its vLLM ignores or rejects."""
    env = facts.get("env")
    if not isinstance(env, dict) or not env:
        return []
    version = facts.get("vllm") if isinstance(facts.get("vllm"), str) else None
    pairs = {str(k): str(v) for k, v in env.items()}
    return [
        DoctorCheck(
            "env.vllm_version",
            "environment vs vLLM",
            WARN,
            text,
            "unset it in the node's environment (or fix its value)",
        )
        for text in version_warnings(version, [], pairs)
    ]


def link_check(how: str, sftp_refusal: str | None) -> DoctorCheck:
    """How the console reaches the node and ships files to it."""
    if sftp_refusal:
        return DoctorCheck(
            "link",
            "console link",
            OK,
            f"{how}; sshd serves no SFTP ({sftp_refusal}): files go through sh on a command "
            "channel, checked by SHA-256",
        )
    return DoctorCheck("link", "console link", OK, how)


BANNER_FIX = (
    "make the login print nothing for commands: in the shell rc file that prints it (~/.bashrc, "
    "/etc/bash.bashrc, ...) print only in interactive shells (put `case $- in *i*) ;; *) return ;; esac` "
    "above the output); a ForceCommand wrapper should print nothing when SSH_ORIGINAL_COMMAND is set"
)
SHELL_FIX = (
    "the account's login must run the command it is given (`ssh NODE echo ok` prints ok): remove the "
    "ForceCommand for it, or give the console an account whose shell runs commands"
)


def banner_check(banner: str | None) -> DoctorCheck | None:
    """A login that prints on stdout before every command: the console works through it
    (it cuts the text off), but it is a warning: every command pays for it, and the
    same text breaks scp, rsync and an sftp-server started through the shell."""
    if not banner:
        return None
    lines = [ln.strip() for ln in banner.splitlines() if ln.strip()]
    first = clip(lines[0], 80) if lines else ""
    return DoctorCheck(
        "link.banner",
        "login banner",
        WARN,
        f"the login prints {len(lines)} line{'s' if len(lines) != 1 else ''} on stdout before every command "
        f"({first!r}); the console skips it",
        BANNER_FIX,
    )


# ------------------------------------------------------------------ rendering


# ------------------------------------------------------------------ GPU health

# The next step for each health rule (console/core/health.py RULES), per vendor where it differs.
_HEALTH_FIX: dict[str, dict[str, str]] = {
    "ecc_uncorrectable": {
        "amd": "drain the GPU (no new instances), save `amd-smi metric --ecc --ecc-blocks` and `amd-smi ras --cper`, "
        "then reboot; if errors come back, open a support/RMA case with those outputs",
        "nvidia": "drain the GPU (no new instances), save `nvidia-smi -q -d ECC,ROW_REMAPPER`, then reset it "
        "(`nvidia-smi -r`) or reboot; if errors come back, open a support/RMA case with that output",
    },
    "pages_pending": {
        "amd": "a bad page waits for retirement: drain the GPU and reboot the node (or reload amdgpu) to retire it",
        "nvidia": "a row remap is pending: drain the GPU and reset it (`nvidia-smi -r`) or reboot to apply it",
    },
    "pages_unreservable": {
        "amd": "a bad page could not be retired: drain the GPU and start the RMA path (`amd-smi bad-pages` output)",
        "nvidia": "a row remap failed: drain the GPU and start the RMA path (`nvidia-smi -q -d ROW_REMAPPER`)",
    },
    "ecc_correctable": {
        "": "corrected by the GPU; watch the rate with `rocm-console events --node NODE --kind gpu.ecc` "
        "and plan a replacement if it keeps rising",
    },
    "ecc_deferred": {
        "": "deferred errors become uncorrectable when their data is used: plan a drain and reboot, "
        "and watch `rocm-console events` for uncorrectable ones",
    },
    "throttle": {
        "": "power-cap throttling under full load is expected; thermal, VR or HBM throttling means check "
        "cooling (fans, airflow, inlet temperature)",
    },
    "pcie_degraded": {
        "": "the link trained below its maximum: reseat the GPU or check the riser / BIOS PCIe settings "
        "at the next maintenance window",
    },
    "link_down": {
        "amd": "an XGMI link is down: check `amd-smi xgmi`; a reboot retrains it, if it stays down the "
        "GPU or baseboard needs service",
        "nvidia": "an NVLink link is down: check `nvidia-smi nvlink -s`; a reboot retrains it, if it stays down "
        "the GPU or baseboard needs service",
    },
    "fault": {
        "amd": "the GPU reset or faulted: read `dmesg` (amdgpu) around that time; repeated resets point at "
        "the GPU or the workload",
        "nvidia": "an XID was reported: look it up in NVIDIA's XID catalogue and read `dmesg` (NVRM) around that time",
    },
}


def health_fix(rule: str, vendor: str = "") -> str:
    """The next step for a health finding, one line."""
    fixes = _HEALTH_FIX.get(rule, {})
    return fixes.get(vendor) or fixes.get("") or next(iter(fixes.values()), "")


def health_checks(gpu_health: Iterable[Any], node: str = "NODE") -> list[DoctorCheck]:
    """One line per physical GPU (console/core/model.py GpuHealth): its state, reasons and the
    next step for its worst finding."""
    out = []
    for health in gpu_health:
        verdict = health.verdict
        level = verdict.state if verdict.state in LEVELS else WARN
        vendor = health.reading.vendor if health.reading is not None else ""
        if verdict.state == "unknown":
            detail, fix = "not read yet", ""
        elif not verdict.findings:
            detail, fix = "nothing found (ECC, bad pages, throttling, PCIe, links, resets)", ""
        else:
            detail = verdict.reasons
            fix = health_fix(verdict.findings[0].rule, vendor).replace("NODE", node)
        out.append(DoctorCheck(f"health.gpu{health.physical}", f"GPU {health.physical} health", level, detail, fix))
    return out


def node_dict(node: NodeDoctor) -> dict[str, Any]:
    return {
        "name": node.name,
        "level": node.level,
        "counts": {lv: node.count(lv) for lv in LEVELS},
        "checks": [
            {"id": c.id, "title": c.title, "level": c.level, "detail": c.detail, "fix": c.fix} for c in node.checks
        ],
        "facts": dict(node.facts),
    }


def to_json(nodes: Sequence[NodeDoctor]) -> dict[str, Any]:
    return {"nodes": [node_dict(n) for n in nodes], "level": worst(n.level for n in nodes)}


def _summary(node: NodeDoctor) -> str:
    parts = [f"{node.count(lv)} {lv}" for lv in (FAIL, WARN) if node.count(lv)]
    return ", ".join(parts) if parts else "all ok"


def render_text(nodes: Sequence[NodeDoctor]) -> str:
    """One block per node: a header, then `level  title  detail` and an indented fix."""
    out: list[str] = []
    for node in nodes:
        out.append(f"{node.name}  {node.level.upper()}  ({_summary(node)})")
        width = min(28, max((len(c.title) for c in node.checks), default=0))
        for c in node.checks:
            out.append(f"  {c.level:<4}  {c.title:<{width}}  {c.detail}")
            if c.fix and c.level != OK:
                out.append(f"  {'':<4}  {'':<{width}}  fix: {c.fix}")
        out.append("")
    failed = [n.name for n in nodes if n.level == FAIL]
    warned = [n.name for n in nodes if n.level == WARN]
    tail = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: "
    tail += f"{len(failed)} failing" + (f" ({', '.join(failed)})" if failed else "")
    tail += f", {len(warned)} with warnings" + (f" ({', '.join(warned)})" if warned else "")
    out.append(tail)
    return "\n".join(out) + "\n"
