"""`node_agent.py tether`: a process on the node that lives exactly as long as a console command.

Runs on the node (stdlib only, Python >= 3.8). A console command that starts an instance of its
own on an SSH node (`baseline save` / `check`) cannot hand the node its own pid: a pid of the
console's machine means nothing there. So it runs this over its SSH connection and keeps the
channel open. The tether writes one line with its own lifeline (lifeline.py: pid and start
time), then reads its stdin until EOF or the line ``end``. The console's instance carries that
lifeline; the node's supervisor ends the instance once the tether is gone.

However the console ends (it quits, SIGTERM, SIGKILL, a closed terminal), its TCP connection
closes, sshd closes the channel and this process reads EOF: the node notices within seconds
without any pid of the console's machine.
"""

import os
import sys

import lifeline  # shipped beside this file

END = b"end"  # a console done with the tether says so; any other line is ignored


def add_parser(modes, parser_class):
    modes.add_parser(
        "tether",
        help="print this process's lifeline, then wait for EOF (or an 'end' line) on stdin",
    )


def wait_for_eof(fd):
    """Return once `fd` reads EOF or a line `end` (the console's own goodbye)."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:  # pragma: no cover - retried by Python >= 3.5 itself
            continue
        except OSError:  # the channel is gone in a way read() reports as an error: the same end
            return
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if any(line.strip() == END for line in lines):
            return
        pending = pending[-64:]  # nothing else is read: the buffer never grows


def run(args, writer, stdin_fd=None):
    pid = os.getpid()
    writer.write({"kind": "tether", "pid": pid, "lifeline": lifeline.token_of(pid)})
    wait_for_eof(sys.stdin.fileno() if stdin_fd is None else stdin_fd)
    return 0
