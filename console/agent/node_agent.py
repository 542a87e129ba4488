#!/usr/bin/env python3
"""rocm-console node agent: GPU telemetry as JSON lines.

Runs on the GPU node (stdlib + amdsmi, Python >= 3.8, no import from the
console package):

    python3 node_agent.py telemetry [--interval 1.0] [--health-interval 10] [--count N] [--amdsmi-path DIR]...
    python3 node_agent.py probe [--amdsmi-path DIR]...
    python3 node_agent.py instance --state-dir DIR start|list|stop NAME|logs NAME|remove NAME
    python3 node_agent.py partition show|set [--gpus all|0,1] [--compute CPX] [--memory NPS4 --reload-driver]
    python3 node_agent.py doctor [--vllm CMD] [--sudo] [--amdsmi-path DIR]...   (doctor.py)

telemetry writes one ``hello`` line, a ``static`` line (again whenever the
GPUs are re-enumerated with different facts), then one ``sample`` line per
tick for every logical GPU, and with --health-interval H (default 10 s, 0 = off) a
``health`` line after the sample of a tick that read some physical GPUs' health
(round-robin: each GPU once per H seconds):
``{"kind": "health", "ts": T, "interval": H, "gpus": [ENTRY, ...], "same": [[PHYSICAL, READ_TIME, N], ...]}``.
A GPU's full ENTRY (its ``physical`` index, the source's results and ``n``, the agent's count of
full entries) goes in ``gpus`` on its first reading, whenever it differs from the last entry
sent for that GPU (timestamps and the clocks of the residency counters left out of the
comparison: sampling.HEALTH_VOLATILE), when it carries events or CPER records, when the
console asks for it, and at least every 360th reading, in a line written at the tick that read
it; otherwise ``[PHYSICAL, READ_TIME, N]`` goes in ``same`` (read then, nothing changed since
the full entry N: the console carries it forward to that time, or asks again when it lacks
entry N), held until the agent writes a sample line or a full entry anyway or 3 H seconds
passed, so a node off screen wakes the console for them once per sample, not once per GPU
read.  ``same`` is left out when empty; a new agent (a reconnect) starts with full entries.
Sources, in order: the amdsmi Python module
(no process per tick), ``amd-smi ... --json``, ``rocm-smi --json``, then for
NVIDIA GPUs (nvidia.py) NVML through pynvml and ``nvidia-smi --query-gpu``.
When none works it writes an ``error`` line and exits 3.  Missing values are null.
On stdin it reads the console's control lines: ``{"kind": "rate", "every": N, "tick": K}`` (a
node off screen) makes it write a full sample every N ticks and a ``tick`` line every K ticks
between (SendRate); ``{"kind": "health", "full": [PHYSICAL, ...]}`` makes those GPUs' next
entries full (HealthDelta.apply).

The agent is a folder of modules imported by file name (the folder is on
sys.path): sampling.py (what every source shares), amdsmi_sampler.py (the
library), amd_health.py (its health readings), smi_cli.py (the amd-smi / rocm-smi
fallbacks, imported only when they are needed), nvidia.py, nvidia_health.py, supervisor.py, partitions.py, doctor.py, lifeline.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time

# Loaded by its path (tests, tools) rather than run: its folder must be on sys.path for the
# sibling modules, as it is when it runs (as a script, or through __main__.py).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from amdsmi_sampler import AmdsmiSampler  # noqa: E402
from sampling import (  # noqa: E402, F401 - nvidia.py and doctor.py are handed this module: agent.num, ...
    HOLD_INTERVALS,
    MAX_CLI_FAILURES,
    AgentError,
    ControlReader,
    HealthDelta,
    HealthSpread,
    SendRate,
    SourceUnavailable,
    describe,
    gpu_metrics,
    num,
    text,
)

AGENT_VERSION = "1"
MIN_INTERVAL = 0.1
MAX_INTERVAL = 10.0
DEFAULT_HEALTH_INTERVAL = 10.0
MAX_HEALTH_INTERVAL = 3600.0

EXIT_OK, EXIT_USAGE, EXIT_NO_SOURCE, EXIT_PARTITION = 0, 2, 3, 4


# ------------------------------------------------------------ source choice


def _which(name):
    import shutil  # imported when a CLI is looked for, not at every start

    return shutil.which(name)


def load_amdsmi(paths):
    """(module, None) or (None, one-line reason).

    The real module prints to stdout and raises KeyError (not ImportError)
    when libamd_smi.so is missing, so stdout is redirected and any exception
    is caught.
    """
    for path in reversed(paths or ()):
        sys.path.insert(0, path)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import amdsmi  # noqa: PLC0415 - optional, found at run time
    except Exception as exc:
        return None, describe(exc)
    return amdsmi, None


def open_nvidia(paths, reasons):
    """(sampler, note) from NVML or nvidia-smi (nvidia.py, shipped beside this file), or None."""
    try:
        import nvidia  # noqa: PLC0415 - shipped beside this file
    except ImportError as exc:
        reasons.append("nvidia.py missing beside the agent (%s)" % exc)
        return None
    return nvidia.open_nvidia(sys.modules[__name__], paths, reasons)


def open_sampler(paths):
    """(sampler, note): the first source that works; AgentError when none does.

    amdsmi, amd-smi, rocm-smi, then NVIDIA's pynvml and nvidia-smi: an AMD
    node never pays for the NVIDIA probes, an NVIDIA node pays one failed
    import and two PATH lookups once."""
    module, why = load_amdsmi(paths)
    if module is not None:
        try:
            return AmdsmiSampler(module), None  # init failure is final for the AMD CLIs: same library
        except AgentError:
            found = open_nvidia(paths, []) if nvidia_present(paths) else None
            if found is None:
                raise
            return found
    reasons = ["amdsmi module unavailable (%s)" % why]
    fallbacks = (
        ("amd-smi", "AmdSmiCliSampler", "amd-smi metric --json"),
        ("rocm-smi", "RocmSmiCliSampler", "rocm-smi --json"),
    )
    for name, cls, how in fallbacks:
        exe = _which(name)
        if exe is None:
            reasons.append("%s not found" % name)
            continue
        try:
            sampler = getattr(cli_fallbacks(), cls)(exe)
        except SourceUnavailable as exc:
            reasons.append("%s failed (%s)" % (name, exc))
            continue
        return sampler, "%s; using %s" % ("; ".join(reasons), how)
    found = open_nvidia(paths, reasons)
    if found is not None:
        return found
    raise AgentError("no telemetry source: " + "; ".join(reasons))


def cli_fallbacks():
    """smi_cli.py, the amd-smi / rocm-smi sources: imported when one is about to be tried,
    so a node whose amdsmi module works never reads it (start-up is budgeted)."""
    import smi_cli  # shipped beside this file

    return smi_cli


def nvidia_present(paths):
    """An NVIDIA stack is on this node: its driver is loaded, nvidia-smi is on PATH,
    or a pynvml module sits in an --amdsmi-path folder (the simulated node)."""
    if os.path.isdir("/proc/driver/nvidia") or _which("nvidia-smi"):
        return True
    return any(os.path.exists(os.path.join(path, "pynvml.py")) for path in paths or ())


# ------------------------------------------------------------------ output


class JsonLineWriter:
    """One compact JSON object per line, flushed so the console sees it at once."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, *objs):
        """Each object as one line; all of them in one write (one wake-up of the console)."""
        self.stream.write("".join(json.dumps(obj, separators=(",", ":")) + "\n" for obj in objs))
        self.stream.flush()

    def silence(self):
        """After EPIPE: point the stream at /dev/null so exit-time flushes stay quiet."""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            pass


def claim_stdout():
    """A private stream on the real stdout; fd 1 then points at stderr.

    Vendor code (Python prints, or C code writing to fd 1) can then never put
    a non-JSON line into the stream the console parses.
    """
    sys.stdout.flush()
    try:
        fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return sys.stdout
    return open(fd, "w", encoding="utf-8", newline="\n")


# ------------------------------------------------------------------ tick loop


def next_deadline(deadline, interval, now):
    """The next tick time on the fixed grid; missed ticks are skipped, not burst."""
    deadline += interval
    if deadline <= now:
        deadline += (math.floor((now - deadline) / interval) + 1) * interval
    return deadline


def health_entries(sampler, spread):
    """This tick's health entries, or None.  Health never breaks telemetry: whatever a
    source raises here costs this tick's health line only (said once on stderr)."""
    try:
        picks = spread.picks(sampler.physical_count())
        return sampler.health(picks) if picks else None
    except Exception as exc:  # a broken reading must not end the sample stream
        if not getattr(spread, "warned", False):
            spread.warned = True
            sys.stderr.write("node_agent: warning: health reading failed (%s)\n" % describe(exc))
        return None


def run_ticks(
    sampler, writer, interval, count, clock=time.monotonic, sleep=time.sleep, health_interval=0.0, control=None
):
    """Write static once (and on change), then one sample per tick and, with
    ``health_interval`` > 0, a health line after the samples of the ticks that read
    some GPUs' health (HealthSpread: every GPU once per health interval), a GPU's entry
    in full only when it changed and every few readings, else its index and read time in
    ``same``, sent with the next line written (HealthDelta).  With a
    ``control`` reader the console may ask for a full sample every N ticks only
    (SendRate): every K-th of the other ticks writes a ``tick`` line; health lines are not
    affected."""
    spread = HealthSpread(interval, health_interval) if health_interval > 0 else None
    delta = HealthDelta(max_hold=HOLD_INTERVALS * health_interval)
    rate = SendRate()
    static = sampler.static()
    writer.write({"kind": "static", "ts": time.time(), "gpus": static})
    deadline = clock()
    tick = 0
    last = None  # the newest sample line, sent or not
    while count is None or tick < count:
        if tick:
            left = deadline - clock()
            while control is not None and not control.closed and left > 0:
                sooner = False
                for message in control.wait(left):
                    sooner = rate.apply(message) or sooner
                    delta.apply(message)  # the console lacks some GPUs' last full entry
                if sooner and last is not None:
                    # back on screen: the newest sample now, not at the next tick (and the GPUs read meanwhile)
                    held = delta.line(time.time(), health_interval, None, True) if spread is not None else None
                    writer.write(last, *([held] if held else []))
                    rate.sent()
                left = deadline - clock()
            sleep(max(0.0, left))
        # A tick's lines go out in one write: the console (a thousand nodes over SSH, or one
        # left open all day) wakes once per node and tick, not once per line.
        lines = []
        changed = sampler.refresh(tick)
        if changed is not None:
            delta.reset()  # a new enumeration: every GPU's next entry in full
        if changed is not None and changed != static:
            static = changed
            lines.append({"kind": "static", "ts": time.time(), "gpus": static})
        gpus = sampler.sample()
        if gpus is not None:  # a CLI tick that failed is skipped: the console marks it stale
            last = {"kind": "sample", "ts": time.time(), "seq": tick, "gpus": gpus}
            kind = rate.line()
            if kind == "sample":
                lines.append(last)
            elif kind == "tick":
                lines.append({"kind": "tick", "ts": last["ts"], "seq": tick})
        if spread is not None:
            sending = any(line["kind"] == "sample" for line in lines)
            health = delta.line(time.time(), health_interval, health_entries(sampler, spread), sending)
            if health is not None:
                lines.append(health)
        if lines:
            writer.write(*lines)
        deadline = next_deadline(deadline, interval, clock())
        tick += 1


def telemetry(args, writer):
    sampler = None
    try:
        sampler, note = open_sampler(args.amdsmi_path)
        hello = {
            "kind": "hello",
            "agent_version": AGENT_VERSION,
            "source": sampler.source,
            "simulated": sampler.simulated,
            "note": note,
            "hostname": os.uname().nodename,
            "interval": args.interval,
            "pid": os.getpid(),
            # reads {"kind": "rate", "every": N, "tick": K} (SendRate) and {"kind": "health", "full":
            # [physical, ...]} (HealthDelta.apply) lines on stdin
            "control": ["rate", "health"],
        }
        if getattr(sampler, "vendor", None):  # NVIDIA samplers say so; no key means AMD
            hello["vendor"] = sampler.vendor
        writer.write(hello)
        run_ticks(
            sampler, writer, args.interval, args.count, health_interval=args.health_interval, control=ControlReader(0)
        )
    except AgentError as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return EXIT_NO_SOURCE
    finally:
        if sampler is not None:
            sampler.close()
    return EXIT_OK


# ------------------------------------------------------------------ probe


def read_text(path):
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def rocm_version():
    # A simulated node's upgraded ROCm lives in its simulator folder (console/sim/host.py upgrade_rocm).
    sim = os.environ.get("ROCM_CONSOLE_SIM_DIR")
    roots = [os.path.join(sim, "opt", "rocm") if sim else None, os.environ.get("ROCM_PATH"), "/opt/rocm"]
    for root in roots:
        if root:
            found = read_text(os.path.join(root, ".info", "version"))
            if found:
                return found
    return None


def dist_version(name):
    """An installed distribution's version without spawning a process."""
    try:
        from importlib import metadata  # Python >= 3.8

        return metadata.version(name)
    except Exception:
        return None


def effective_uid(module):
    """This user's uid; 0 on a simulated node whose spec makes its user root (the demo), as
    the simulated amdsmi then lets that user switch partitions."""
    if module is not None and getattr(module, "SIM_VLLM_VERSION", None):
        import statefiles  # shipped beside this file: the simulators' own reading of the spec

        try:
            if statefiles.sim_spec().get("root") is True:
                return 0
        except ValueError:
            pass  # a bad spec: the simulated amdsmi says so at init; here the real user counts
    return os.geteuid()


def probe(args):
    module, _ = load_amdsmi(args.amdsmi_path)
    if module is not None:
        source = "amdsmi"
    else:
        source = next((n for n in ("amd-smi", "rocm-smi") if _which(n)), None)
        if source is None and nvidia_present(args.amdsmi_path):
            import nvidia  # noqa: PLC0415 - shipped beside this file: the source its sampler would use

            source = nvidia.probe_source(args.amdsmi_path)
    version = getattr(module, "__version__", None) if module is not None else None
    return {
        "kind": "probe",
        "hostname": os.uname().nodename,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "rocm": rocm_version(),
        "amdsmi": None if version is None else str(version),
        # A simulated node has no vllm distribution: its simulator says which it imitates.
        "vllm": dist_version("vllm") or (getattr(module, "SIM_VLLM_VERSION", None) if module is not None else None),
        "numa_balancing": read_text("/proc/sys/kernel/numa_balancing"),
        "source": source,
        "uid": effective_uid(module),
    }


# ------------------------------------------------------------------ main


class JsonArgumentParser(argparse.ArgumentParser):
    """Usage errors become an ``error`` line (exit 2): the console reads stdout only."""

    writer = None

    def error(self, message):
        if JsonArgumentParser.writer is not None:
            JsonArgumentParser.writer.write({"kind": "error", "message": message})
        self.exit(EXIT_USAGE, "%s: error: %s\n" % (self.prog, message))


def interval_arg(value):
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds, got %r" % value) from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:  # also rejects nan
        raise argparse.ArgumentTypeError(
            "must be between %g and %g seconds, got %s" % (MIN_INTERVAL, MAX_INTERVAL, value)
        )
    return seconds


def health_interval_arg(value):
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds (0 turns health off), got %r" % value) from None
    if seconds != 0 and not MIN_INTERVAL <= seconds <= MAX_HEALTH_INTERVAL:  # also rejects nan
        raise argparse.ArgumentTypeError(
            "must be 0 (off) or between %g and %g seconds, got %s" % (MIN_INTERVAL, MAX_HEALTH_INTERVAL, value)
        )
    return seconds


def count_arg(value):
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError("must be a positive integer, got %r" % value)
    return n


MODES = ("telemetry", "probe", "instance", "partition", "doctor", "instance-monitor", "tether")


def build_parser(only=None):
    """The agent's parser; with `only` (a mode named on the command line) just that mode's
    part: argparse costs ~1 ms per sub-parser, and the console starts the agent often."""

    def want(mode):
        return only is None or only == mode

    parser = JsonArgumentParser(prog="node_agent.py", description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", parser_class=JsonArgumentParser)
    modes.required = True
    if want("telemetry"):
        tel = modes.add_parser("telemetry", help="stream GPU telemetry as JSON lines")
        tel.add_argument("--interval", type=interval_arg, default=1.0, help="seconds (0.1-10)")
        tel.add_argument("--count", type=count_arg, default=None, help="ticks, then exit 0")
        tel.add_argument(
            "--health-interval",
            type=health_interval_arg,
            default=DEFAULT_HEALTH_INTERVAL,
            help="seconds between two health readings of a GPU (0 = no health lines)",
        )
        _add_amdsmi_path(tel)
    if want("probe"):
        _add_amdsmi_path(modes.add_parser("probe", help="print one JSON line about this node"))
    if want("instance"):
        inst = modes.add_parser("instance", help="start/list/stop/logs of supervised instances")
        inst.add_argument("--state-dir", required=True)
        inst.add_argument(
            "--group",
            choices=("instances", "runs"),
            default="instances",
            help="instances (vllm serve) or runs (benchmark clients)",
        )
        ops = inst.add_subparsers(dest="op", parser_class=JsonArgumentParser)
        ops.required = True
        ops.add_parser("start", help="spec JSON on stdin")
        ops.add_parser("list")
        for op in ("stop", "logs", "remove", "ports"):
            sub = ops.add_parser(op)
            sub.add_argument("name")
            if op == "stop":
                sub.add_argument("--int-timeout", type=float, default=30.0)
                sub.add_argument("--term-timeout", type=float, default=10.0)
            if op == "logs":
                sub.add_argument("--offset", type=int, default=0)
                sub.add_argument("--lines", type=int, default=None)
                sub.add_argument("--follow", action="store_true")
                sub.add_argument("--max-seconds", type=float, default=None)
                sub.add_argument("--split-cr", action="store_true", help="turn \\r redraws into line ends")
    if want("partition"):
        part = modes.add_parser("partition", help="show or set compute/memory partition modes")
        part_ops = part.add_subparsers(dest="op", parser_class=JsonArgumentParser)
        part_ops.required = True
        _add_amdsmi_path(part_ops.add_parser("show"))
        part_set = part_ops.add_parser("set")
        part_set.add_argument("--gpus", default="all", help="physical GPUs: all or 0,1,...")
        part_set.add_argument("--compute", type=str.upper, default=None)
        part_set.add_argument("--memory", type=str.upper, default=None)
        part_set.add_argument(
            "--reload-driver", action="store_true", help="confirm the amdgpu driver reload a memory switch needs"
        )
        _add_amdsmi_path(part_set)
    if want("doctor"):
        doc = modes.add_parser("doctor", help="check this node for rocm-console (one JSON line)")
        doc.add_argument("--amdsmi-path", action="append", default=[], metavar="DIR")
        doc.add_argument("--vllm", default="vllm", help="how vllm is run on this node (a command line)")
        doc.add_argument("--sudo", action="store_true", help="the console runs partition switches through sudo -n")
        doc.add_argument("--sysroot", default="/", help="read /proc, /sys, /dev, /opt below this folder")
    if want("instance-monitor"):
        mon = modes.add_parser("instance-monitor", help=argparse.SUPPRESS)
        mon.add_argument("folder")
    if want("process"):  # end a GPU process (processes.py)
        import processes  # shipped beside this file

        processes.add_parser(modes, JsonArgumentParser, _add_amdsmi_path)
    if want("models"):  # the models on the node (models.py)
        import models  # shipped beside this file

        models.add_parser(modes, JsonArgumentParser)
    if want("tether"):  # ties a console command's instances to its SSH session (tether.py)
        import tether  # shipped beside this file

        tether.add_parser(modes, JsonArgumentParser)
    return parser


def _add_amdsmi_path(sub):
    sub.add_argument(
        "--amdsmi-path",
        action="append",
        default=[],
        metavar="DIR",
        help="put DIR first on sys.path before importing amdsmi",
    )


def partition(args, writer):
    """Partition show/set; failures are an error line with a reason class, exit 4."""
    import partitions  # shipped beside this file

    try:
        if args.op == "show":
            writer.write(partitions.show(load_amdsmi, args.amdsmi_path))
            return EXIT_OK
        physical = None
        if args.gpus != "all":
            try:
                physical = sorted({int(x) for x in args.gpus.split(",") if x.strip()})
            except ValueError:
                raise partitions.PartitionError("--gpus %r: expected all or 0,1,..." % args.gpus, "invalid")
        if args.compute is None and args.memory is None:
            raise partitions.PartitionError("nothing to set: give --compute and/or --memory", "invalid")
        writer.write(
            partitions.set_modes(load_amdsmi, args.amdsmi_path, physical, args.compute, args.memory, args.reload_driver)
        )
        return EXIT_OK
    except partitions.PartitionError as exc:
        writer.write({"kind": "error", "message": str(exc), "reason": exc.kind})
        return EXIT_PARTITION


def instance(args, writer):
    """Supervisor commands; one JSON line per record (logs: the raw log bytes)."""
    import supervisor  # shipped beside this file

    supervisor.GROUP = args.group
    try:
        if args.op == "start":
            spec = json.loads(sys.stdin.read() or "{}")
            if not isinstance(spec, dict):
                raise supervisor.SupervisorError("the spec on stdin must be a JSON object")
            writer.write(supervisor.start(args.state_dir, spec, os.path.abspath(__file__)))
        elif args.op == "list":
            foreign = supervisor.foreign_vllm(args.state_dir) if args.group == "instances" else []
            for rec in supervisor.list_instances(args.state_dir) + foreign:
                writer.write(rec)
        elif args.op == "stop":
            writer.write(supervisor.stop(args.state_dir, args.name, args.int_timeout, args.term_timeout))
        elif args.op == "remove":
            writer.write(supervisor.remove(args.state_dir, args.name))
        elif args.op == "ports":
            ports = supervisor.listening_ports(args.state_dir, args.name)
            writer.write({"kind": "ports", "name": args.name, "ports": ports})
        elif args.op == "logs":
            supervisor.logs(
                args.state_dir,
                args.name,
                writer.stream.buffer,
                offset=args.offset,
                follow=args.follow,
                lines=args.lines,
                max_seconds=args.max_seconds,
                split_cr=args.split_cr,
            )
    except (supervisor.SupervisorError, ValueError) as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return EXIT_USAGE
    return EXIT_OK


def main(argv=None):
    writer = JsonLineWriter(claim_stdout())
    JsonArgumentParser.writer = writer
    try:
        line = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(line[0] if line and line[0] in MODES else None).parse_args(line)
        if args.mode != "instance-monitor":  # the monitor stops its instance first (supervisor)
            import lifeline  # shipped beside this file

            lifeline.watch(lambda: os._exit(EXIT_OK))  # a demo console that is gone reads nothing more
        if args.mode == "probe":
            writer.write(probe(args))
            return EXIT_OK
        if args.mode == "instance":
            return instance(args, writer)
        if args.mode == "partition":
            return partition(args, writer)
        if args.mode == "process":
            import processes  # shipped beside this file

            return processes.run(sys.modules[__name__], args, writer)
        if args.mode == "doctor":
            import doctor  # shipped beside this file

            writer.write(doctor.run(sys.modules[__name__], args))
            return EXIT_OK
        if args.mode == "models":
            import models  # shipped beside this file

            return models.run(args, writer)
        if args.mode == "tether":
            import tether  # shipped beside this file

            return tether.run(args, writer)
        if args.mode == "instance-monitor":
            import supervisor

            return supervisor.monitor(args.folder)
        return telemetry(args, writer)
    except BrokenPipeError:  # the console went away: nothing left to report to
        writer.silence()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
