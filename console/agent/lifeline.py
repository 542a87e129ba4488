"""Lifeline: a process the demo console started ends when that console is gone.

The simulated vLLM imports this same file: console/sim/vllm/lifeline.py is a git symlink to it,
and the agent bundle ships it in both places.

Runs on the node (stdlib only, Python >= 3.8). The console's demo puts
``ROCM_CONSOLE_LIFELINE=<pid>:<start time>`` into the environment of everything it
starts on its local, simulated nodes. A process that finds the variable watches that
process once a second and calls ``on_gone`` when it has ended, whichever way it ended
(quit, SIGTERM, SIGHUP of a closed terminal, SIGKILL): the start time from
/proc/<pid>/stat tells a reused pid from the console itself. Without the variable
(real nodes) nothing is watched and instances outlive the console as they always did.

The same file is shipped twice, beside the node agent and inside the simulated vllm
folder (which never imports anything outside itself); a test keeps the copies equal.
"""

import os
import threading
import time

ENV = "ROCM_CONSOLE_LIFELINE"
CHECK_INTERVAL = 1.0  # seconds between two looks at the console: one small file read


def start_time(pid):
    """The process's start time in clock ticks since boot, or None when it does not exist
    (or is a zombie: ended, not yet reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return fields[19]  # field 22 of stat(5); the first field after the ")" is field 3
    except IndexError:
        return None


def token_of(pid):
    """The value a console puts into ``ENV`` for process ``pid``."""
    return "%d:%s" % (pid, start_time(pid) or "")


def parse(value):
    """(pid, start time) from the variable's value, None when it holds no lifeline."""
    if not value:
        return None
    pid, _, started = value.partition(":")
    try:
        pid = int(pid)
    except ValueError:
        return None
    return (pid, started) if pid > 1 else None


def owner_alive(owner):
    pid, started = owner
    if os.path.isdir("/proc/self"):
        now = start_time(pid)
        return now is not None and (not started or now == started)
    try:  # no /proc (not Linux): the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def watch(on_gone, environ=None, interval=CHECK_INTERVAL):
    """Call on_gone() (from a daemon thread) once the console named in the environment
    has ended; returns the thread, or None when there is no lifeline to watch."""
    owner = parse((os.environ if environ is None else environ).get(ENV))
    if owner is None:
        return None

    def loop():
        while owner_alive(owner):
            time.sleep(interval)
        on_gone()

    thread = threading.Thread(target=loop, name="lifeline", daemon=True)
    thread.start()
    return thread
