"""A node whose agent misbehaves: the python3 named in the profile is a wrapper that, for the
agent modes a test picks, runs a hostile stand-in instead of the agent (every other mode, and
every other command, runs the real agent under the real python3).

Behaviours (``behave``: agent mode -> what it does):

* ``("write", path)``: write the bytes of ``path`` to stdout as they are, then exit 0.
* ``("write_hold", path)``: the same, then stay (a live stream that says nothing more).
* ``("flood", n_bytes)``: write ``n_bytes`` of ``a`` with no newline (1 MiB at a time), exit 0.
* ``("hang", stubborn)``: record its pid, its process group and a child's pid (``sleep``, same
  group) in ``pids.txt``, then sleep; ``stubborn`` ignores SIGTERM (only SIGKILL ends it).

The stand-in is plain Python run by the node's real python3; the wrapper is ``sh``.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

AGENT_MODES = ("telemetry", "probe", "instance", "partition", "doctor")

_STAND_IN = r"""
import json, os, signal, subprocess, sys, time
plan = json.load(open(sys.argv[1]))
mode = sys.argv[2]
kind, arg = plan[mode]
out = sys.stdout.buffer
if kind in ("write", "write_hold"):
    with open(arg, "rb") as fh:
        out.write(fh.read())
    out.flush()
    if kind == "write_hold":
        time.sleep(300)
elif kind == "flood":
    chunk = b"a" * (1024 * 1024)
    left = int(arg)
    while left > 0:
        out.write(chunk[:left])
        left -= len(chunk)
    out.flush()
elif kind == "hang":
    if arg:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "300"])
    with open(plan["pids_file"], "a") as fh:
        fh.write("%d %d %d\n" % (os.getpid(), os.getpgid(0), child.pid))
    time.sleep(300)
"""


# Valid agent lines whose text is hostile: escape sequences (clear screen, OSC 52 clipboard),
# a bell, a carriage return, a bidi override, and Rich markup. The console must show all of it
# as visible text and act on none of it.
EVIL = r"\u001b[2J\u0007\r\u001b]52;c;SGVsbG8=\u0007[red]boom[/]\u202e"  # JSON escapes
EVIL_SHOWN = r"\x1b[2J\x07\r\x1b]52;c;SGVsbG8=\x07[red]boom[/]\u202e"  # what a screen shows
HOSTILE_TELEMETRY = (
    '{"kind":"hello","source":"amdsmi","hostname":"node' + EVIL + '","interval":1}\n'
    '{"kind":"static","ts":1,"gpus":[{"index":0,"physical":0,"model":"MI300X' + EVIL + '",'
    '"compute_partition":"SPX","memory_partition":"NPS1","vram_total_mib":196592}]}\n'
    '{"kind":"sample","ts":1,"seq":1,"gpus":[{"index":0,"util_pct":5,"vram_used_mib":1024,'
    '"vram_total_mib":196592,"power_w":100,"power_cap_w":750,'
    '"processes":[{"pid":4242,"name":"evil' + EVIL + '","vram_mib":1}]}]}\n'
).encode()
HOSTILE_PROBE = ('{"kind":"probe","hostname":"host' + EVIL + '","rocm":"7.0' + EVIL + '","vllm":"0.32[/]"}\n').encode()


def hostile_python(folder: Path, behave: dict[str, tuple[str, object]], real: str | None = None) -> str:
    """Write the wrapper and its stand-in into `folder`; returns the wrapper's path (the node's python)."""
    folder.mkdir(parents=True, exist_ok=True)
    real = real or sys.executable if not os.path.exists("/usr/bin/python3") else "/usr/bin/python3"
    plan = {mode: list(what) for mode, what in behave.items()}
    plan["pids_file"] = str(folder / "pids.txt")  # type: ignore[assignment]
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "stand_in.py").write_text(_STAND_IN)
    modes = "|".join(behave) or "none"
    wrapper = folder / "python3"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# python [-S] BUNDLE MODE ...: the agent's mode is among the first three arguments\n"
        "mode=\n"
        'for a in "$1" "$2" "$3"; do case $a in ' + "|".join(AGENT_MODES) + ") mode=$a; break ;; esac; done\n"
        f"case $mode in {modes}) exec {shlex.quote(real)} {shlex.quote(str(folder / 'stand_in.py'))} "
        f'{shlex.quote(str(folder / "plan.json"))} "$mode" ;; esac\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def recorded_pids(folder: Path) -> list[tuple[int, int, int]]:
    """(pid, process group, child pid) of every hung stand-in that started."""
    path = folder / "pids.txt"
    if not path.exists():
        return []
    return [tuple(int(x) for x in line.split()) for line in path.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(int(entry))
    return found
