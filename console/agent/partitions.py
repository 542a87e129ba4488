"""Partition get/set on the node (stdlib + amdsmi, Python >= 3.8).

Getters need no root; setters do (the console runs this through ``sudo -n``
when the profile says ``sudo = true``). After a change every amdsmi handle is
invalid: shut down, init again, re-enumerate, and verify (reference §3-4).
Without the amdsmi module the CLIs are used: ``amd-smi set -g N -C MODE`` then
``rocm-smi -d N --setcomputepartition MODE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

COMPUTE_MODES = ("SPX", "DPX", "TPX", "QPX", "CPX")
MEMORY_MODES = ("NPS1", "NPS2", "NPS4", "NPS8")
# The amdsmi enum each setter takes, and the members asked for by mode name.
COMPUTE_ENUM = ("AmdSmiComputePartitionType", COMPUTE_MODES)
MEMORY_ENUM = ("AmdSmiMemoryPartitionType", MEMORY_MODES)
CLI_TIMEOUT = 300.0  # a memory switch can take minutes

# amdsmi status codes (reference §3) -> what a person should read.
REASONS = {
    1: "invalid for the current memory mode",
    2: "not supported on this GPU",
    10: "no permission (needs root: set sudo = true in the profile, or log in as root)",
    30: "busy: processes are using the GPU",
    32: "amdsmi not initialised",
    34: "the amdgpu driver is not loaded",
    54: "driver reload failed: processes are still using the GPUs",
    55: "mode not available on this GPU",
}


class PartitionError(Exception):
    """A one-line reason, and which code class it is (no_perm, busy, invalid, unsupported, failed)."""

    def __init__(self, message, kind="failed"):
        Exception.__init__(self, message)
        self.kind = kind


def _kind(code):
    return {10: "no_perm", 30: "busy", 54: "busy", 1: "invalid", 55: "invalid", 2: "unsupported"}.get(code, "failed")


def _status(exc):
    getter = getattr(exc, "get_error_code", None)
    if getter is None:
        return None
    try:
        return int(getter())
    except Exception:
        return None


def explain(exc):
    code = _status(exc)
    if code in REASONS:
        return PartitionError(REASONS[code], _kind(code))
    return PartitionError("%s: %s" % (type(exc).__name__, exc))


def _text(value):
    """'SPX', 'NPS1', or None for N/A; amd-smi's profile table marks the current one 'SPX*'."""
    if value is None:
        return None
    text = str(value).strip().rstrip("*").strip()
    return None if not text or text.upper() == "N/A" else text.upper()


def _physical_key(bdf):
    return bdf.rsplit(".", 1)[0] if bdf and "." in bdf else bdf


# ------------------------------------------------------------------ amdsmi path


class AmdsmiPartitions:
    def __init__(self, module):
        self.m = module
        with contextlib.redirect_stdout(sys.stderr):
            self.m.amdsmi_init()

    def close(self):
        try:
            self.m.amdsmi_shut_down()
        except Exception:
            pass

    def _reinit(self):
        self.close()
        with contextlib.redirect_stdout(sys.stderr):
            self.m.amdsmi_init()

    def physical(self):
        """[(physical index, primary handle, logical count)] in enumeration order."""
        groups = []
        index = {}
        for h in self.m.amdsmi_get_processor_handles():
            try:
                key = _physical_key(self.m.amdsmi_get_gpu_device_bdf(h))
            except Exception:
                key = None
            if key is None or key not in index:
                index[key if key is not None else object()] = len(groups)
                groups.append([h, 1])
            else:
                groups[index[key]][1] += 1
        return [(i, h, n) for i, (h, n) in enumerate(groups)]

    def read(self):
        out = []
        for i, h, n in self.physical():
            caps = None
            try:
                config = self.m.amdsmi_get_gpu_memory_partition_config(h)
                raw = config.get("partition_caps") if isinstance(config, dict) else None
                if isinstance(raw, str):
                    raw = raw.split(",")
                caps = [c for c in (_text(x) for x in raw or ()) if c]
            except Exception:
                pass
            out.append(
                {
                    "physical": i,
                    "compute_partition": self._get("amdsmi_get_gpu_compute_partition", h),
                    "memory_partition": self._get("amdsmi_get_gpu_memory_partition", h),
                    "memory_caps": caps,
                    "logical_gpus": n,
                }
            )
        return out

    def _get(self, name, h):
        """A partition getter (a mode name, "N/A" or "" when unknown) -> the mode or None."""
        try:
            return _text(getattr(self.m, name)(h))
        except Exception:
            return None

    def _member(self, spec, mode):
        enum_name, modes = spec
        return getattr(getattr(self.m, enum_name), mode) if mode in modes else None

    def set_compute(self, physical, mode):
        targets = self._targets(physical)
        for i, h in targets:
            try:
                self.m.amdsmi_set_gpu_compute_partition(h, self._member(COMPUTE_ENUM, mode))
            except Exception as exc:
                err = explain(exc)
                raise PartitionError("GPU %d: %s" % (i, err), err.kind)
        self._reinit()

    def set_memory(self, physical, mode):
        targets = self._targets(physical)
        for i, h in targets:
            try:
                self.m.amdsmi_set_gpu_memory_partition(h, self._member(MEMORY_ENUM, mode))
            except Exception as exc:
                err = explain(exc)
                raise PartitionError("GPU %d: %s" % (i, err), err.kind)
        # ROCm >= 7.0: the new memory mode takes effect only after a driver reload.
        try:
            self.m.amdsmi_gpu_driver_reload()
        except AttributeError:
            raise PartitionError("this amdsmi has no driver reload: run `amd-smi reset -r` as root", "unsupported")
        except Exception as exc:
            err = explain(exc)
            raise PartitionError("driver reload: %s" % err, err.kind)
        self._reinit()

    def _targets(self, physical):
        phys = self.physical()
        if physical is None:
            return [(i, h) for i, h, _ in phys]
        known = {i: h for i, h, _ in phys}
        missing = [p for p in physical if p not in known]
        if missing:
            raise PartitionError("no physical GPU %d (the node has %d)" % (missing[0], len(phys)), "invalid")
        return [(p, known[p]) for p in physical]


# ------------------------------------------------------------------ CLI fallback


class CliPartitions:
    """amd-smi, then rocm-smi: a process per call, used only when amdsmi cannot load."""

    def __init__(self):
        self.amd_smi = shutil.which("amd-smi")
        self.rocm_smi = shutil.which("rocm-smi")
        if not self.amd_smi and not self.rocm_smi:
            raise PartitionError("no partition tool: amdsmi module, amd-smi and rocm-smi all missing", "unsupported")

    def close(self):
        pass

    def _run(self, argv):
        try:
            proc = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=CLI_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            raise PartitionError("%s timed out" % os.path.basename(argv[0]))
        if proc.returncode != 0:
            text = proc.stdout.strip().splitlines()
            last = text[-1] if text else "exit %d" % proc.returncode
            kind = "no_perm" if re.search(r"permission|root|sudo", last, re.I) else "failed"
            raise PartitionError("%s: %s" % (os.path.basename(argv[0]), last), kind)
        return proc.stdout

    def _json(self, argv):
        """A CLI's JSON document (text before it, such as amd-smi's permission
        banner, skipped), or None when the command fails or prints none."""
        try:
            out = self._run(argv)
        except PartitionError:
            return None
        decoder = json.JSONDecoder()
        for match in re.finditer(r"(?:^|\n)[ \t]*([\[{])", out):
            try:
                return decoder.raw_decode(out, match.start(1))[0]
            except ValueError:
                continue
        return None

    def read(self):
        """Per physical GPU: modes, memory caps and logical count, as the amdsmi path
        reports them; [] when neither CLI answers (the caller then cannot verify)."""
        if self.amd_smi:
            gpus = self._read_amd_smi()
            if gpus:
                return gpus
        return self._read_rocm_smi() if self.rocm_smi else []

    def _read_amd_smi(self):
        # logical GPUs and their BDFs; partitions of one GPU share domain:bus:device
        listed = _records(self._json([self.amd_smi, "list", "--json"]))
        logical = [(_index(r, pos), r.get("bdf")) for pos, r in enumerate(listed)]
        modes = {}
        doc = self._json([self.amd_smi, "partition", "--current", "--memory", "--json"])  # amd-smi >= 26
        if isinstance(doc, dict):
            for pos, e in enumerate(_records(doc, "current_partition")):
                modes[_index(e, pos)] = [_text(e.get("accelerator_type")), _text(e.get("memory")), None]
            for pos, e in enumerate(_records(doc, "memory_partition")):
                row = modes.setdefault(_index(e, pos), [None, None, None])
                row[1] = row[1] or _text(e.get("current_memory_partition"))
                row[2] = _caps(e.get("memory_partition_caps"))
        if not modes or any(row[0] is None for row in modes.values()):
            # before 26 the modes were in static; an answer with the memory table
            # alone (a real `partition -m` shape) leaves the compute mode to it too
            for pos, r in enumerate(_records(self._json([self.amd_smi, "static", "--partition", "--json"]))):
                part = r.get("partition") if isinstance(r.get("partition"), dict) else {}
                row = modes.setdefault(_index(r, pos), [None, None, None])
                row[0] = row[0] or _text(part.get("compute_partition"))
                row[1] = row[1] or _text(part.get("memory_partition"))
        if not logical:
            logical = [(i, None) for i in sorted(modes)]
        return _group(logical, modes)

    def _read_rocm_smi(self):
        doc = self._json([self.rocm_smi, "--showbus", "--showcomputepartition", "--showmemorypartition", "--json"])
        logical, modes = [], {}
        for key, card in sorted((doc or {}).items()) if isinstance(doc, dict) else ():
            if not (key.startswith("card") and key[4:].isdigit() and isinstance(card, dict)):
                continue
            lowered = dict((k.lower(), v) for k, v in card.items())
            index = int(key[4:])
            logical.append((index, lowered.get("pci bus")))
            modes[index] = [_text(lowered.get("compute partition")), _text(lowered.get("memory partition")), None]
        logical.sort()
        return _group(logical, modes)

    def _each(self, physical, args_for):
        for p in physical if physical is not None else [None]:
            self._run(args_for(p))

    def set_compute(self, physical, mode):
        if self.amd_smi:
            self._each(physical, lambda p: [self.amd_smi, "set"] + ([] if p is None else ["-g", str(p)]) + ["-C", mode])
        else:
            self._each(
                physical,
                lambda p: [self.rocm_smi] + ([] if p is None else ["-d", str(p)]) + ["--setcomputepartition", mode],
            )

    def set_memory(self, physical, mode):
        if self.amd_smi:
            self._each(physical, lambda p: [self.amd_smi, "set"] + ([] if p is None else ["-g", str(p)]) + ["-M", mode])
            self._run([self.amd_smi, "reset", "-r"])
        else:
            self._each(
                physical,
                lambda p: [self.rocm_smi] + ([] if p is None else ["-d", str(p)]) + ["--setmemorypartition", mode],
            )


def _records(doc, key="gpu_data"):
    """amd-smi >= 26 wraps per-GPU lists in an object, older releases print the list."""
    if isinstance(doc, dict):
        doc = doc.get(key)
    return [r for r in doc if isinstance(r, dict)] if isinstance(doc, list) else []


def _index(record, pos):
    for key in ("gpu", "gpu_id"):
        try:
            return int(str(record.get(key)).strip())
        except ValueError:
            continue
    return pos


def _caps(value):
    if isinstance(value, str):
        value = value.split(",")
    return [c for c in (_text(v) for v in value or ()) if c] if isinstance(value, (list, tuple)) else None


def _group(logical, modes):
    """[{physical, modes of its first partition, logical_gpus}] by shared BDF prefix."""
    order, members = [], {}
    for index, bdf in logical:
        key = _physical_key(bdf.strip().lower()) if isinstance(bdf, str) and bdf.strip() else ("#", index)
        if key not in members:
            order.append(key)
            members[key] = []
        members[key].append(index)
    out = []
    for i, key in enumerate(order):
        compute, memory, caps = modes.get(members[key][0], (None, None, None))
        out.append(
            {
                "physical": i,
                "compute_partition": compute,
                "memory_partition": memory,
                "memory_caps": caps,
                "logical_gpus": len(members[key]),
            }
        )
    return out


# ------------------------------------------------------------------ entry points


def open_backend(load_amdsmi, paths):
    module, _why = load_amdsmi(paths)
    if module is not None:
        try:
            return AmdsmiPartitions(module)
        except Exception as exc:
            raise explain(exc)
    return CliPartitions()


def show(load_amdsmi, paths):
    backend = open_backend(load_amdsmi, paths)
    try:
        return {"kind": "partitions", "gpus": backend.read()}
    finally:
        backend.close()


def set_modes(load_amdsmi, paths, physical, compute=None, memory=None, reload_driver=False):
    """Switch, then verify from a fresh enumeration; returns the partitions record."""
    if compute is not None and compute not in COMPUTE_MODES:
        raise PartitionError(
            "unknown compute partition %r (one of %s)" % (compute, ", ".join(COMPUTE_MODES)), "invalid"
        )
    if memory is not None and memory not in MEMORY_MODES:
        raise PartitionError("unknown memory partition %r (one of %s)" % (memory, ", ".join(MEMORY_MODES)), "invalid")
    if memory is not None and not reload_driver:
        raise PartitionError(
            "a memory partition change reloads the amdgpu driver: confirm with --reload-driver", "invalid"
        )
    backend = open_backend(load_amdsmi, paths)
    started = time.time()
    try:
        if memory is not None:
            backend.set_memory(physical, memory)
        if compute is not None:
            backend.set_compute(physical, compute)
        gpus = backend.read()
    finally:
        backend.close()
    chosen = [g for g in gpus if physical is None or g["physical"] in physical]
    wrong = [
        g
        for g in chosen
        if (compute and g["compute_partition"] not in (None, compute))
        or (memory and g["memory_partition"] not in (None, memory))
    ]
    if wrong:
        g = wrong[0]
        raise PartitionError(
            "GPU %d reports %s/%s after the switch" % (g["physical"], g["compute_partition"], g["memory_partition"])
        )
    # a mode that cannot be read back is not a pass: say which GPUs stay unverified
    seen = set(g["physical"] for g in chosen)
    unverified = sorted(
        set(p for p in (physical or ()) if p not in seen)
        | set(
            g["physical"]
            for g in chosen
            if (compute and g["compute_partition"] is None) or (memory and g["memory_partition"] is None)
        )
    )
    if not chosen:
        unverified = sorted(physical) if physical else ["all"]
    return {
        "kind": "partitions",
        "gpus": gpus,
        "seconds": round(time.time() - started, 2),
        "logical_gpus": sum(g["logical_gpus"] for g in gpus),
        "unverified": unverified,
    }
