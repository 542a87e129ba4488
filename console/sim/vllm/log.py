"""vLLM 0.32's log line shapes: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:N] message`."""

import os
import sys
import time

from .constants import REASONS


class Log:
    """vLLM's log shapes: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:N] message`."""

    def __init__(self, world):
        self.pid = os.getpid()
        self.engine_pid = self.pid + 49
        self.worker_pid = self.pid + 89
        self.world = world

    @staticmethod
    def _emit(text, err=False):
        stream = sys.stderr if err else sys.stdout
        try:
            buf = getattr(stream, "buffer", None)
            if buf is not None:
                buf.write(text.encode("utf-8", "replace"))
                buf.flush()
            else:
                stream.write(text)
                stream.flush()
        except (OSError, ValueError):
            pass

    def tag(self, who):
        if who == "api":
            return "(APIServer pid=%d) " % self.pid
        if who == "engine":
            return "(EngineCore pid=%d) " % self.engine_pid
        return "(%s pid=%d) " % (self.worker_name(who), self.worker_pid + int(who))

    def worker_name(self, rank):
        return "Worker" if self.world == 1 else "Worker_TP%d" % int(rank)

    def __call__(self, who, level, src, msg=""):
        head = "%s%s %s [%s] " % (self.tag(who), level, time.strftime("%m-%d %H:%M:%S"), src)
        self._emit("".join(head + line + "\n" for line in str(msg).split("\n")))

    def block(self, who, level, src, lines):
        for line in lines:
            self(who, level, src, line)

    def tagged(self, who, lines):
        """Lines a child process wrote to its stderr (only the process tag, no level)."""
        tag = self.tag(who)
        self._emit("".join(tag + line + "\n" for line in lines), err=True)

    def raw(self, lines, err=False):
        if isinstance(lines, str):
            lines = [lines]
        self._emit("".join(line + "\n" for line in lines), err)

    def uvicorn(self, msg):
        self._emit("INFO:     %s\n" % msg, err=True)

    def access(self, client, method, target, version, status):
        self._emit(
            'INFO:     %s - "%s %s HTTP/%s" %d %s\n'
            % (client, method, target, version, status, REASONS.get(status, ""))
        )


BANNER = [
    "",
    "       \u2588     \u2588     \u2588\u2584   \u2584\u2588",
    " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version {version}",
    "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588  model   {model}",
    "   \u2580\u2580  \u2580\u2580\u2580\u2580\u2580 \u2580\u2580\u2580\u2580\u2580 \u2580     \u2580",
    "",
]
