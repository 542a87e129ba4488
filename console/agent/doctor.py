"""`node_agent.py doctor`: what a person debugging this node needs, as one JSON line.

Runs on the GPU node (stdlib only, Python >= 3.8, shipped beside node_agent.py).
Every check is a record ``{"id", "title", "level", "detail", "fix"}`` with level
ok / warn / fail; ``facts`` carries the raw findings (versions, GPUs, host
settings) for ``--json`` readers.  Nothing here changes the node.

The telemetry sources are tried exactly as ``telemetry`` tries them (the agent
module's own loader and samplers are passed in), so "which source loaded and
why the others did not" is the agent's real answer, the ``amdsmi`` import error
verbatim, with what the library printed while failing.

Host facts are read below ``sysroot`` (``/`` on a node; a folder of files for
tests and simulated nodes), the environment, user and commands come from a
``Host`` object, so every rule can be tested without a GPU.
"""

from __future__ import annotations

import contextlib
import grp
import io
import json
import os
import platform
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys

OK, WARN, FAIL = "ok", "warn", "fail"
CMD_TIMEOUT = 30.0  # amd-smi, modinfo, sudo
VLLM_TIMEOUT = 60.0  # `vllm --version` imports torch: seconds on a real node

# The host settings AMD's guides recommend for vLLM on Instinct GPUs (the seeds:
# ROCm "vLLM inference performance" guide, "Performance environment variables"
# and "AITER switches"; the MI300X benchmark guide's "System optimization").
# (name, value, why, only for nodes with several MI300-class GPUs)
RECOMMENDED_ENV = (
    ("HIP_FORCE_DEV_KERNARG", "1", "faster kernel launches; AMD's vLLM images set it, bare-metal hosts must", False),
    ("TORCH_BLAS_PREFER_HIPBLASLT", "1", "hipBLASLt for GEMMs (faster linear layers)", False),
    ("VLLM_ROCM_USE_AITER", "1", "AITER kernels, recommended for most workloads (off by default)", False),
    ("NCCL_MIN_NCHANNELS", "112", "112 RCCL channels instead of 32-64 for tensor/pipeline parallel on MI300X", True),
)
# Set in the login environment they pin every instance to the same GPUs.
VISIBLE_DEVICES = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
ENV_PREFIXES = (
    "VLLM_",
    "HIP_",
    "HSA_",
    "ROCR_",
    "ROCM_",
    "NCCL_",
    "RCCL_",
    "TORCH_",
    "PYTORCH_",
    "CUDA_VISIBLE_DEVICES",
    "SAFETENSORS_",
)
SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def check(id_, title, level, detail, fix=""):
    return {"id": id_, "title": title, "level": level, "detail": detail, "fix": fix}


def one_line(text, limit=400):
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Host:
    """Where the checks look: files below sysroot, environment, user, commands."""

    def __init__(self, sysroot="/", environ=None, euid=None, user=None, which=None, run=None, access=None):
        self.sysroot = sysroot or "/"
        self.environ = dict(os.environ if environ is None else environ)
        self.euid = os.geteuid() if euid is None else euid
        self.user = user if user is not None else _user_name(self.euid)
        self.which = which or (lambda name: shutil.which(name, path=self.environ.get("PATH")))
        self._run = run
        self._access = access or (lambda path: os.access(path, os.R_OK | os.W_OK))

    def can_open(self, absolute):
        """Readable and writable by this user (what opening a GPU device needs)."""
        return self._access(self.path(absolute))

    def path(self, absolute):
        return os.path.join(self.sysroot, absolute.lstrip("/"))

    def read(self, absolute):
        try:
            with open(self.path(absolute)) as fh:
                return fh.read().strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def run(self, argv, timeout=CMD_TIMEOUT):
        """(exit status, stdout, stderr); status None when it could not run or timed out."""
        if self._run is not None:
            return self._run(argv, timeout)
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,  # noqa: UP022 - 3.8
                stderr=subprocess.PIPE,
                universal_newlines=True,
                timeout=timeout,  # noqa: UP021
                env=self.environ,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None, "", "timed out after %g s" % timeout
        except OSError as exc:
            return None, "", "%s: %s" % (type(exc).__name__, exc)
        return proc.returncode, proc.stdout, proc.stderr


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def last_line(*texts):
    for text in texts:
        lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return ""


# ------------------------------------------------------------ telemetry sources


def amdsmi_fix(error, python):
    if error.startswith(("ModuleNotFoundError", "ImportError: No module")):
        return "install the amdsmi package of this ROCm into %s: `%s -m pip install /opt/rocm/share/amd_smi`" % (
            python,
            python,
        )
    if "libamd_smi" in error or error.startswith("OSError"):
        return (
            "libamd_smi.so not found: install amd-smi-lib (ROCm's package), or point ROCM_PATH "
            "or LD_LIBRARY_PATH at the ROCm lib folder"
        )
    return "reinstall the amdsmi package that matches ROCm: `%s -m pip install /opt/rocm/share/amd_smi`" % python


def _captured(buf):
    """What a library printed while failing, its lines joined with '; '."""
    lines = []
    for line in buf.getvalue().splitlines():
        if line.strip() and line.strip() not in lines:
            lines.append(line.strip())
    return one_line("; ".join(lines))


def check_sources(agent, paths, host, python):
    """(checks, facts, sampler or None): the telemetry sources, tried by the agent's rules.

    As in ``telemetry``: the amdsmi module first; the CLIs only when it cannot be
    imported (an amdsmi that imports but cannot initialise is final: the CLIs
    use the same library).
    """
    facts = {"amdsmi_package": agent.dist_version("amdsmi"), "amdsmi": None, "simulated": False}
    sampler, used, final = None, None, False
    failed = []  # sources tried before the one in use
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):  # what the library prints while failing
        module, why = agent.load_amdsmi(paths)
    if module is None:
        said = _captured(buf)
        facts["amdsmi_error"] = why
        failed.append(
            check(
                "source.amdsmi",
                "amdsmi module",
                FAIL,
                "cannot import amdsmi: %s%s" % (why, " (the library printed: %s)" % said if said else ""),
                amdsmi_fix(why, python),
            )
        )
    else:
        version = getattr(module, "__version__", None)
        facts["amdsmi"] = None if version is None else str(version)
        facts["simulated"] = bool(getattr(module, "__simulated__", False))
        shown = "amdsmi %s%s" % (facts["amdsmi"] or "(no version)", " (simulated)" if facts["simulated"] else "")
        try:
            with contextlib.redirect_stderr(buf):
                sampler = agent.AmdsmiSampler(module)
            used = check("source.amdsmi", "amdsmi module", OK, "%s loaded: telemetry through library calls" % shown)
        except Exception as exc:
            final = True
            facts["amdsmi_error"] = one_line(exc)
            said = _captured(buf)
            failed.append(
                check(
                    "source.amdsmi",
                    "amdsmi module",
                    FAIL,
                    "%s imports, but %s%s" % (shown, one_line(exc), " (it printed: %s)" % said if said else ""),
                    "is the amdgpu driver loaded and /dev/kfd open to this user? (see those lines)",
                )
            )

    fallbacks = (
        (
            "amd-smi",
            "AmdSmiCliSampler",
            "amd-smi metric --json",
            "install amd-smi (ROCm's amd-smi-lib package) and put /opt/rocm/bin on PATH",
        ),
        (
            "rocm-smi",
            "RocmSmiCliSampler",
            "rocm-smi --json",
            "install rocm-smi (ROCm's rocm-smi-lib package) and put /opt/rocm/bin on PATH",
        ),
    )
    later = []
    for name, cls_name, how, fix in fallbacks:
        exe = host.which(name)
        facts[name.replace("-", "_") + "_path"] = exe
        cid, title = "source." + name, name + " CLI"
        where = "on PATH at %s" % exe if exe else "not on PATH"
        if sampler is not None or final:
            reason = (
                ("%s works" % used["title"])
                if sampler is not None
                else "the agent does not fall back when amdsmi imports but cannot initialise"
            )
            later.append(check(cid, title, OK, "not tried, %s; %s" % (reason, where)))
            continue
        if exe is None:
            failed.append(check(cid, title, FAIL, "%s not found on PATH" % name, fix))
            continue
        try:
            sampler = getattr(agent.cli_fallbacks(), cls_name)(exe)
        except Exception as exc:  # SourceUnavailable, or anything a strange output raises
            failed.append(
                check(cid, title, FAIL, "%s failed: %s" % (how, one_line(exc)), "run `%s` on the node to see why" % how)
            )
            continue
        used = check(cid, title, OK, "telemetry through `%s` (%s): a process per tick" % (how, exe))
    if sampler is None and not final and agent.nvidia_present(paths):
        sampler, used = nvidia_source(agent, paths, failed)
        if sampler is not None:  # an NVIDIA node: the AMD sources are not missing, just not its own
            for c in failed:
                c.update(level=OK, detail="not used on an NVIDIA node (%s)" % c["detail"], fix="")
            facts["simulated"] = bool(sampler.simulated)
    if sampler is not None:
        for c in failed:  # a source above the one in use: worth fixing, not fatal
            if c["level"] == FAIL:
                c["level"] = WARN
    facts["source"] = sampler.source if sampler is not None else None
    checks = failed + ([used] if used is not None else []) + later
    if sampler is None:
        checks.append(
            check(
                "telemetry",
                "telemetry",
                FAIL,
                "no telemetry source works on this node",
                "fix one of the sources above (the amdsmi module is the cheap one)",
            )
        )
    return checks, facts, sampler


def nvidia_source(agent, paths, failed):
    """(sampler, its check) through the agent's NVIDIA sources (nvidia.py), or (None, None)
    with a failing check appended: NVML's own words for a driver/library mismatch."""
    try:
        found = agent.open_nvidia(paths, [])
    except Exception as exc:  # AgentError: NVML loads and says what is wrong
        failed.append(check("source.nvidia", "NVIDIA NVML", FAIL, one_line(exc), "see NVML's message above"))
        return None, None
    if found is None:
        failed.append(check("source.nvidia", "NVIDIA NVML", FAIL, "neither pynvml nor nvidia-smi works here"))
        return None, None
    sampler = found[0]
    shown = "the pynvml module" if sampler.source == "nvml" else "nvidia-smi --query-gpu (a process per tick)"
    simulated = " (simulated)" if sampler.simulated else ""
    return sampler, check("source.nvidia", "NVIDIA NVML", OK, "telemetry through %s%s" % (shown, simulated))


def describe_gpus(rows):
    """Physical GPUs from static rows: [{physical, model, compute, memory, logical}]."""
    out = {}
    for row in rows:
        phys = row.get("physical", row.get("index"))
        entry = out.setdefault(
            phys,
            {
                "physical": phys,
                "model": row.get("model"),
                "compute_partition": row.get("compute_partition"),
                "memory_partition": row.get("memory_partition"),
                "logical_gpus": 0,
            },
        )
        entry["logical_gpus"] += 1
    return [out[k] for k in sorted(out, key=lambda k: (k is None, k))]


def _ranges(numbers):
    parts, start, prev = [], None, None
    for n in numbers:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(str(start) if start == prev else "%d-%d" % (start, prev))
            start = prev = n
    if start is not None:
        parts.append(str(start) if start == prev else "%d-%d" % (start, prev))
    return ",".join(parts)


NO_PARTITION = "no partition"


def check_gpus(sampler):
    """(checks, gpus facts): models and partition modes, and one real sample."""
    try:
        gpus = describe_gpus(sampler.static())
    except Exception as exc:
        return [
            check(
                "gpus",
                "GPUs",
                FAIL,
                "cannot list the GPUs: %s: %s" % (type(exc).__name__, exc),
                "see the telemetry source lines",
            )
        ], []
    if not gpus:
        return [
            check(
                "gpus",
                "GPUs",
                FAIL,
                "%s lists no GPU" % sampler.source,
                "is the amdgpu driver loaded? (`dmesg | grep amdgpu`)",
            )
        ], []
    models = sorted({g["model"] or "unknown model" for g in gpus})
    modes = {}
    for g in gpus:
        # A GPU without partition modes (NVIDIA without MIG, a simulated one) has none to show,
        # not "?/?"
        if g["compute_partition"] or g["memory_partition"]:
            key = "%s/%s" % (g["compute_partition"] or "?", g["memory_partition"] or "?")
        else:
            key = NO_PARTITION
        modes.setdefault(key, []).append(g["physical"])
    logical = sum(g["logical_gpus"] for g in gpus)
    if len(modes) == 1:
        shown = [k for k in modes if k != NO_PARTITION]
    else:
        shown = [
            "GPU %s %s" % (_ranges(sorted(p for p in v if p is not None)), k)
            for k, v in sorted(modes.items(), key=lambda kv: kv[1])
        ]
    detail = ", ".join(
        ["%d x %s" % (len(gpus), " + ".join(models))]
        + shown
        + ["%d logical GPU%s" % (logical, "" if logical == 1 else "s")]
    )
    checks = [check("gpus", "GPUs", OK, detail)]
    try:
        sampler.refresh(0)
        rows = sampler.sample()
    except Exception as exc:
        checks.append(
            check(
                "sample",
                "one sample",
                FAIL,
                "reading a sample failed: %s: %s" % (type(exc).__name__, exc),
                "see the telemetry source lines",
            )
        )
        return checks, gpus
    if not rows:
        checks.append(
            check(
                "sample",
                "one sample",
                WARN,
                "%s gave no sample this time" % sampler.source,
                "run the doctor again; if it persists, see the telemetry source lines",
            )
        )
    else:
        read = [r for r in rows if r.get("util_pct") is not None or r.get("vram_used_mib") is not None]
        level = OK if read else WARN
        checks.append(
            check(
                "sample",
                "one sample",
                level,
                "%d of %d GPUs report utilisation or VRAM" % (len(read), len(rows)),
                "" if read else "every value was N/A: see the driver line",
            )
        )
    return checks, gpus


# ------------------------------------------------------------------ versions


def rocm_version(host):
    for root in (host.environ.get("ROCM_PATH"), "/opt/rocm"):
        if root:
            found = host.read(os.path.join(root, ".info", "version"))
            if found:
                return found, os.path.join(root, ".info", "version")
    return None, None


def check_python(facts, python):
    facts["hostname"] = socket.gethostname()
    facts["python"] = platform.python_version()
    facts["python_path"] = python
    facts["kernel"] = platform.release()
    return check("python", "Python", OK, "Python %s (%s)" % (facts["python"], python))


def check_versions(agent, host, vllm_argv, facts):
    rocm, where = rocm_version(host)
    facts["rocm"] = rocm
    if rocm:
        checks = [check("rocm", "ROCm", OK, "ROCm %s (%s)" % (rocm, where))]
    else:
        checks = [
            check(
                "rocm",
                "ROCm",
                WARN,
                "no ROCm version file (/opt/rocm/.info/version)",
                "install ROCm, or set ROCM_PATH to where it is installed",
            )
        ]
    checks.append(_driver_check(host, facts))
    checks.append(_amd_smi_version(host, facts))
    checks.append(_vllm_check(agent, host, vllm_argv, facts))
    checks.append(_clients_check(host, facts))
    return checks


BENCH_CLIENTS = ("guidellm", "aiperf")  # issue B2: the outside serving-benchmark clients


def _clients_check(host, facts):
    """Where the node's PATH has GuideLLM and AIPerf; optional (a preset's client_path may name
    one elsewhere), so never more than a note."""
    found = {name: host.which(name) for name in BENCH_CLIENTS}
    facts["bench_clients"] = found
    shown = "; ".join("%s %s" % (n, ("at " + p) if p else "not on PATH") for n, p in found.items())
    fix = ""
    if not all(found.values()):
        fix = 'only for bench presets with client = "guidellm" / "aiperf": install it (pip), or set client_path'
    return check("bench-clients", "benchmark clients", OK, shown, fix)


def _driver_check(host, facts):
    version = host.read("/sys/module/amdgpu/version")
    loaded = os.path.isdir(host.path("/sys/module/amdgpu"))
    facts["amdgpu"] = version
    facts["amdgpu_loaded"] = loaded
    if version:
        return check("driver", "amdgpu driver", OK, "amdgpu %s loaded (/sys/module/amdgpu/version)" % version)
    installed = None
    if host.which("modinfo"):
        code, out, _ = host.run(["modinfo", "-F", "version", "amdgpu"])
        installed = out.strip() if code == 0 and out.strip() else None
    facts["amdgpu_installed"] = installed
    if loaded:
        return check(
            "driver",
            "amdgpu driver",
            WARN,
            "amdgpu loaded without a version: the kernel's in-box driver (kernel %s)%s"
            % (platform.release(), ", amdgpu-dkms %s installed" % installed if installed else ""),
            "ROCm supports its own amdgpu-dkms driver: install it with the ROCm installer, then reboot",
        )
    return check(
        "driver",
        "amdgpu driver",
        FAIL,
        "the amdgpu kernel module is not loaded%s" % (" (amdgpu %s is installed)" % installed if installed else ""),
        "`sudo modprobe amdgpu`, and `dmesg | grep -i amdgpu` for why it did not load at boot",
    )


# "AMDSMI Tool: 24.6.3+9578815 | AMDSMI Library version: 24.6.3.0 | ROCm version: 6.2.4"
_AMD_SMI_VERSION = re.compile(r"AMDSMI Tool:\s*([^|\s]+)", re.IGNORECASE)


def _amd_smi_version(host, facts):
    exe = host.which("amd-smi")
    package = facts.get("amdsmi_package")
    facts["amd_smi"] = None
    if exe is None:
        detail = "amd-smi not on PATH"
        if package:
            detail += "; amdsmi Python package %s" % package
        return check(
            "amd-smi",
            "amd-smi",
            WARN if not package else OK,
            detail,
            "" if package else "install amd-smi (ROCm's amd-smi-lib package)",
        )
    code, out, err = host.run([exe, "version"])
    line = last_line(out)
    if code != 0 or not line:
        return check(
            "amd-smi",
            "amd-smi",
            WARN,
            "`amd-smi version` failed: %s" % one_line(last_line(err, out) or "exit %s" % code),
            "run `amd-smi version` on the node to see why",
        )
    m = _AMD_SMI_VERSION.search(line)
    facts["amd_smi"] = m.group(1).strip() if m else line
    return check("amd-smi", "amd-smi", OK, one_line(line) + ("; amdsmi Python package %s" % package if package else ""))


_VERSION = re.compile(r"^\d+\.\d+")


def vllm_version(agent, host, argv):
    """(version, how) of the node's vLLM: its package if `vllm` is the plain command, else `... --version`."""
    if argv == ["vllm"]:
        found = agent.dist_version("vllm")
        if found:
            return found, "package in %s" % sys.executable, None
        if host.which("vllm") is None:
            return None, None, "`vllm` is not on PATH and no vllm package is installed in %s" % sys.executable
    code, out, err = host.run(list(argv) + ["--version"], timeout=VLLM_TIMEOUT)
    line = last_line(out)
    if code == 0 and _VERSION.match(line):
        return line, "`%s --version`" % " ".join(shlex.quote(a) for a in argv), None
    return (
        None,
        None,
        "`%s --version` failed: %s"
        % (" ".join(shlex.quote(a) for a in argv), one_line(last_line(err, out) or "exit %s" % code, 200)),
    )


def _vllm_check(agent, host, argv, facts):
    version, how, why = vllm_version(agent, host, argv)
    facts["vllm"] = version
    if version:
        return check("vllm", "vLLM", OK, "vLLM %s (%s)" % (version, how))
    return check(
        "vllm",
        "vLLM",
        WARN,
        why,
        "install vLLM for ROCm on the node (AMD's rocm/vllm images carry it), or set "
        'vllm = "<command>" for this node in the profile',
    )


# ------------------------------------------------------------------ host settings


def check_numa(host, facts):
    value = host.read("/proc/sys/kernel/numa_balancing")
    facts["numa_balancing"] = value
    fix = (
        "`sudo sysctl -w kernel.numa_balancing=0`; to keep it after a reboot: "
        "`echo kernel.numa_balancing=0 | sudo tee /etc/sysctl.d/90-numa-balancing.conf`"
    )
    if value == "0":
        return check("numa_balancing", "NUMA balancing", OK, "kernel.numa_balancing = 0 (off, as AMD recommends)")
    if value is None:
        return check(
            "numa_balancing",
            "NUMA balancing",
            WARN,
            "cannot read /proc/sys/kernel/numa_balancing",
            "check it is 0: " + fix,
        )
    return check(
        "numa_balancing",
        "NUMA balancing",
        WARN,
        "kernel.numa_balancing = %s: automatic NUMA balancing costs GPU throughput" % value,
        fix,
    )


def check_env(host, gpus, facts):
    env = {}
    for name, value in sorted(host.environ.items()):
        if name.startswith(ENV_PREFIXES):
            env[name] = "<redacted>" if SECRET.search(name) else value
    facts["env"] = env
    checks = []
    mi300_class = [g for g in gpus if re.search(r"MI3[02]\dX", g.get("model") or "")]
    for name, want, why, multi in RECOMMENDED_ENV:
        if multi and len(mi300_class) < 2:
            continue
        have = host.environ.get(name)
        cid, title = "env." + name, name
        if have == want:
            checks.append(check(cid, title, OK, "%s=%s (%s)" % (name, have, why)))
            continue
        detail = ("%s is not set" % name) if have is None else ("%s=%s, recommended %s" % (name, have, want))
        checks.append(
            check(
                cid,
                title,
                WARN,
                "%s: %s" % (detail, why),
                "set %s=%s in the serve preset's env, or export it in the node's environment" % (name, want),
            )
        )
    for name in VISIBLE_DEVICES:
        if name in host.environ:
            checks.append(
                check(
                    "env." + name,
                    name,
                    WARN,
                    "%s=%s in the login environment limits every vLLM instance to those GPUs"
                    % (name, host.environ[name]),
                    "unset it in the node's shell profile: the console picks the GPUs per instance",
                )
            )
    return checks


def _access(host, path):
    """(read-write for this user, owning group) of a device; (None, None) when it is missing."""
    try:
        st = os.stat(host.path(path))
    except OSError:
        return None, None
    return host.can_open(path), _group_name(st.st_gid)


def check_devices(host, facts):
    user = host.user
    group_fix = "add %s to the render and video groups: `sudo usermod -aG render,video %s`, then log in again" % (
        user,
        user,
    )
    checks = []
    ok, group = _access(host, "/dev/kfd")
    facts["kfd"] = None if ok is None else {"rw": ok, "group": group}
    if ok is None:
        checks.append(
            check(
                "kfd",
                "/dev/kfd",
                FAIL,
                "/dev/kfd does not exist: the amdgpu/KFD driver is not loaded",
                "`sudo modprobe amdgpu` (see the driver line)",
            )
        )
    elif ok:
        checks.append(
            check("kfd", "/dev/kfd", OK, "/dev/kfd is readable and writable by %s (group %s)" % (user, group))
        )
    else:
        checks.append(
            check("kfd", "/dev/kfd", FAIL, "%s cannot open /dev/kfd read-write (group %s)" % (user, group), group_fix)
        )

    dri = host.path("/dev/dri")
    try:
        nodes = sorted(n for n in os.listdir(dri) if n.startswith("renderD"))
    except OSError:
        nodes = []
    denied, groups = [], set()
    for n in nodes:
        rw, group = _access(host, "/dev/dri/" + n)
        groups.add(group)
        if not rw:
            denied.append(n)
    facts["render_nodes"] = {"count": len(nodes), "denied": denied, "groups": sorted(g for g in groups if g)}
    if not nodes:
        checks.append(
            check(
                "render",
                "/dev/dri render nodes",
                FAIL,
                "no /dev/dri/renderD* device",
                "`sudo modprobe amdgpu` (see the driver line)",
            )
        )
    elif denied:
        checks.append(
            check(
                "render",
                "/dev/dri render nodes",
                FAIL,
                "%s cannot open %d of %d render nodes "
                "(%s; group %s)"
                % (user, len(denied), len(nodes), ", ".join(denied[:4]), "/".join(sorted(g for g in groups if g))),
                group_fix,
            )
        )
    else:
        checks.append(
            check(
                "render",
                "/dev/dri render nodes",
                OK,
                "%d render nodes, read-write for %s (group %s)"
                % (len(nodes), user, "/".join(sorted(g for g in groups if g))),
            )
        )
    return checks


def check_root(host, profile_sudo, facts):
    """Partition switches need root: a root login, or `sudo -n` (the profile's sudo = true)."""
    facts["euid"] = host.euid
    facts["user"] = host.user
    title = "root for partition switches"
    if host.euid == 0:
        facts["sudo"] = None
        return check("root", title, OK, "logged in as root: partition switches allowed")
    if host.which("sudo") is None:
        facts["sudo"] = False
        why = "%s is not root and sudo is not installed" % host.user
    else:
        code, out, err = host.run(["sudo", "-n", "true"], timeout=10)
        facts["sudo"] = code == 0
        if code == 0 and profile_sudo:
            return check("root", title, OK, "`sudo -n` works for %s and the profile uses it (sudo = true)" % host.user)
        if code == 0:
            return check(
                "root",
                title,
                WARN,
                "`sudo -n` works for %s, but the profile has sudo = false: "
                "partition switches will be refused" % host.user,
                "set sudo = true for this node in the profile",
            )
        why = "%s is not root and `sudo -n` refused: %s" % (
            host.user,
            one_line(last_line(err, out) or "exit %s" % code, 200),
        )
    fix = (
        "log in as root, or allow passwordless sudo for %s (a NOPASSWD line in /etc/sudoers.d/) "
        "and set sudo = true in the profile" % host.user
    )
    return check(
        "root",
        title,
        FAIL if profile_sudo else WARN,
        why + ("" if profile_sudo else ": partition switches will be refused"),
        fix,
    )


# ------------------------------------------------------------------ entry point


NVIDIA_SOURCES = ("nvml", "nvidia-smi")
# What only an AMD node needs: ROCm, amdgpu, amd-smi, /dev/kfd and the render nodes, root
# for partition switches, and AMD's vLLM environment (the *_VISIBLE_DEVICES checks stay).
AMD_ONLY = ("rocm", "driver", "amd-smi", "kfd", "render", "root")


def not_amd(checks):
    """On an NVIDIA node the AMD-only lines say so instead of failing."""
    amd_env = set("env." + name for name, _, _, _ in RECOMMENDED_ENV)
    for c in checks:
        if (c["id"] in AMD_ONLY or c["id"] in amd_env) and c["level"] != OK:
            c.update(level=OK, detail="not used on an NVIDIA node (%s)" % c["detail"], fix="")


# A simulated node's spec (console/sim), in the environment of everything the console runs there;
# never set on a real node.
SIM_SPEC_ENV = "ROCM_CONSOLE_SIM_SPEC"
# Lines read from files below the sysroot: on a simulated node, console/sim/host.py's files.
HOST_FILE_CHECKS = ("rocm", "driver", "numa_balancing", "kfd", "render")


def sim_spec(host):
    """The simulated node's spec (a dict), or None on a real node (or an unreadable spec)."""
    text = host.environ.get(SIM_SPEC_ENV)
    if not text:
        return None
    try:
        spec = json.loads(text)
    except ValueError:
        return None
    return spec if isinstance(spec, dict) else None


def mark_simulated(checks, facts, host):
    """On a simulated node, say which facts are simulated: a first line naming each simulated
    part and where it lives, and "(simulated)" on each line that reads one. A person must never
    take the demo's ROCm, driver, vLLM or root for the machine's own. Real nodes: unchanged."""
    spec = sim_spec(host)
    parts, marked = [], set()
    if facts.get("simulated"):
        nvidia = facts.get("source") in NVIDIA_SOURCES
        parts.append("NVML: simulated (console/sim/pynvml.py)" if nvidia else "amdsmi: simulated (console/sim/amdsmi)")
    if str(facts.get("vllm") or "").endswith("+sim"):
        parts.append("vLLM: simulated (console/sim/vllm)")
        marked.add("vllm")
    if spec is not None and host.sysroot != "/":
        parts.append("ROCm, amdgpu, NUMA, /dev/kfd and render nodes: simulated files (console/sim/host.py)")
        marked.update(HOST_FILE_CHECKS)
    root = spec.get("root") if spec is not None else None
    if isinstance(root, bool):
        parts.append("root: simulated (simulate.root = %s in the profile)" % str(root).lower())
        for c in checks:
            if c["id"] != "root":
                continue
            if root:
                c.update(level=OK, detail="simulated root: the simulated amdsmi allows partition switches", fix="")
            else:
                c.update(
                    level=WARN,
                    detail="simulated non-root: the simulated amdsmi refuses partition switches",
                    fix="set root = true in the node's simulate table",
                )
    if not parts:
        return
    for c in checks:
        if c["id"] in marked and "simulated" not in c["detail"]:
            c["detail"] += " (simulated)"
    facts["simulated_parts"] = parts
    checks.insert(0, check("simulated", "simulated node", OK, "; ".join(parts) + ": no real GPU behind this node"))


def run_checks(agent, amdsmi_paths, host, vllm_argv=("vllm",), profile_sudo=False):
    """The doctor record: {"kind": "doctor", "checks": [...], "facts": {...}}.

    Lines in the order a person reads them: Python, telemetry sources, GPUs,
    versions, host settings, environment.
    """
    python = sys.executable or "python3"
    facts = {}
    checks = [check_python(facts, python)]
    source_checks, source_facts, sampler = check_sources(agent, amdsmi_paths, host, python)
    checks.extend(source_checks)
    facts.update(source_facts)
    gpus = []
    if sampler is not None:
        try:
            gpu_checks, gpus = check_gpus(sampler)
            checks.extend(gpu_checks)
        finally:
            with contextlib.suppress(Exception):  # closing must not hide the report
                sampler.close()
    facts["gpus"] = gpus
    checks.extend(check_versions(agent, host, list(vllm_argv), facts))
    checks.append(check_numa(host, facts))
    checks.extend(check_devices(host, facts))
    checks.append(check_root(host, profile_sudo, facts))
    checks.extend(check_env(host, gpus, facts))
    if facts.get("source") in NVIDIA_SOURCES:
        not_amd(checks)
    mark_simulated(checks, facts, host)
    if host.sysroot != "/":
        facts["sysroot"] = host.sysroot
    return {"kind": "doctor", "checks": checks, "facts": facts}


def run(agent, args):
    """Entry point of node_agent.py's doctor mode (args: amdsmi_path, vllm, sudo, sysroot)."""
    host = Host(sysroot=args.sysroot)
    try:
        vllm_argv = shlex.split(args.vllm) or ["vllm"]
    except ValueError:
        vllm_argv = [args.vllm]
    return run_checks(agent, args.amdsmi_path, host, vllm_argv, args.sudo)
