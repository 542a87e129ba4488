"""What runs on the node around each command of SshTransport, and the readers of what it prints.

Every command runs under a tiny ``sh`` wrapper (``wrapper_script``): it says its process
id on stderr (``StderrReader`` picks that line out, so a command given up on can be
ended with ``KILL_SCRIPT``), prints a begin marker on stdout (``BeginReader``: what
comes before it is the login's banner) and execs the command. ``SPAWN_SCRIPT`` starts
a detached process, ``EXEC_UPLOAD_SCRIPT`` writes a file when sshd serves no SFTP.
The scripts are POSIX sh and take their arguments as "$@": nothing is spliced into them.
"""

from __future__ import annotations

import asyncio
import collections
import re

import asyncssh

from console.core.text import clip, printable
from console.transport.base import READ_CHUNK, STDERR_TAIL, LineSplitter, decode

_PGID_MARK = "rocm-console-pgid"
BEGIN_MARK = "rocm-console-begin"
BANNER_LIMIT = 256 * 1024  # bytes of login banner read while looking for the begin marker
STDERR_LINE = 64 * 1024  # a longer stderr line keeps its first bytes


def wrapper_script(begin: str) -> str:
    """`sh -c WRAPPER sh ARGV...`: say our pid on stderr, the begin marker on stdout, become ARGV."""
    return f'echo "{_PGID_MARK} $$" >&2; echo "{begin}"; exec "$@"'


# Found anywhere in a stderr line: a banner without a final newline may precede it.
_PGID_RE = re.compile(rf"{_PGID_MARK} (\d+)$")
# `sh -c KILL_SCRIPT sh PID`: end the process group PID is in (sshd makes each session a group of
# its own: the login shell and all it started), else PID alone; SIGTERM, a grace of up to 3 s,
# then SIGKILL for what is left. The group is looked up rather than assumed to be PID: a login
# shell or ForceCommand that does not exec the command leads the group itself.
KILL_SCRIPT = r"""
p=$1
g=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')
if [ -z "$g" ] && [ -r "/proc/$p/stat" ]; then
  s=$(cat "/proc/$p/stat" 2>/dev/null) && s=${s##*) } && set -- $s && g=$3
fi
case $g in ''|0|1|*[!0-9]*) g= ;; esac
gone() { ! kill -0 "$p" 2>/dev/null && { [ -z "$g" ] || ! kill -0 "-$g" 2>/dev/null; }; }
[ -n "$g" ] && kill -TERM "-$g" 2>/dev/null
kill -TERM "$p" 2>/dev/null
i=0
while [ $i -lt 30 ] && ! gone; do sleep 0.1; i=$((i+1)); done
if ! gone; then
  [ -n "$g" ] && kill -KILL "-$g" 2>/dev/null
  kill -KILL "$p" 2>/dev/null
fi
exit 0
"""
# `sh -c SPAWN_SCRIPT sh LOG ARGV...`: detached, own session, output appended to LOG.
SPAWN_SCRIPT = (
    "begin=$1; log=$2; shift 2; "
    'case $log in "~/"*) log="$HOME/${log#"~/"}";; esac; '
    'mkdir -p -- "$(dirname -- "$log")" && : >>"$log" || exit 1; '
    'exec setsid "$@" >>"$log" 2>&1 </dev/null & echo "$begin $!"'
)
# `sh -c EXEC_UPLOAD_SCRIPT sh PATH MODE SHA256 PYTHON`, the file on stdin: the upload
# when sshd serves no SFTP. Written beside PATH under a temporary name, checked
# against the SHA-256 the console computed, then renamed over PATH (one
# rename(2) in one folder: atomic). The temporary file goes on any failure.
EXEC_UPLOAD_SCRIPT = r"""
path=$1 mode=$2 want=$3 py=$4
case $path in "~") path=$HOME ;; "~/"*) path="$HOME/${path#"~/"}" ;; esac
if [ -d "$path" ]; then echo "$path is a directory" >&2; exit 1; fi
dir=$(dirname -- "$path") && base=$(basename -- "$path") && mkdir -p -- "$dir" || exit 1
tmp="$dir/.$base.$$.tmp"
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 1' HUP INT TERM PIPE
(umask 077 && cat >"$tmp") || exit 1
if command -v sha256sum >/dev/null 2>&1; then got=$(sha256sum <"$tmp")
elif command -v shasum >/dev/null 2>&1; then got=$(shasum -a 256 <"$tmp")
else got=$("$py" -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())' <"$tmp")
fi || { echo "cannot compute a SHA-256 (no sha256sum, shasum or $py)" >&2; exit 1; }
got=${got%% *}
if [ "$got" != "$want" ]; then
  echo "content check failed: sha256 ${got:-none} on the node, $want sent (upload cut short?)" >&2; exit 1
fi
chmod "$mode" "$tmp" && mv -f -- "$tmp" "$path"
"""


class BeginReader:
    """Finds the begin marker in a command's stdout; what came before it is the login's banner."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode() + b"\n"
        self.found = False
        self.banner = b""
        self._head = bytearray()

    def feed(self, data: bytes) -> bytes:
        """The command's own bytes in `data` (none until the marker has been seen)."""
        if self.found:
            return data
        self._head += data
        at = self._head.find(self.marker)
        if at < 0:
            if len(self._head) > BANNER_LIMIT:
                raise BannerTooLong(bytes(self._head[:200]))
            return b""
        self.found = True
        self.banner = bytes(self._head[:at])
        rest = bytes(self._head[at + len(self.marker) :])
        self._head = bytearray()
        return rest

    def head(self) -> bytes:
        return bytes(self._head)


class BannerTooLong(Exception):
    def __init__(self, head: bytes) -> None:
        super().__init__("banner too long")
        self.head = head


def first_line(data: bytes, limit: int = 80) -> str:
    """The first non-blank line of a banner, short and printable."""
    for line in decode(data).splitlines():
        if line.strip():
            return printable(clip(line.strip(), limit))
    return ""


class StderrReader:
    """Collects a wrapped command's stderr (its tail), picks out the pid line.

    What the node prints on stderr before that line is its login's, not the command's."""

    def __init__(self, keep_all: bool) -> None:
        self.keep_all = keep_all
        self.lines: collections.deque[str] = collections.deque()
        self._size = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.pgid: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    def feed(self, line: str) -> None:
        if not self.pgid.done():
            m = _PGID_RE.search(line.rstrip("\r\n"))
            if m:
                self.pgid.set_result(int(m.group(1)))
            return  # the pid line, or the login's words before it
        if self.keep_all:
            self.lines.append(line)
            self._size += len(line)
            while self._size > STDERR_TAIL and len(self.lines) > 1:
                self._size -= len(self.lines.popleft())
        if line.strip():
            self.tail.append(line.strip())

    async def drain(self, proc: asyncssh.SSHClientProcess) -> None:
        lines = LineSplitter(STDERR_LINE)
        try:
            while True:
                chunk = await proc.stderr.read(READ_CHUNK)
                if not chunk:
                    break
                for raw, cut in lines.feed(chunk):
                    self.feed(decode(raw) + (" …" if cut else "") + "\n")
            for raw, cut in lines.close():
                self.feed(decode(raw) + (" …" if cut else ""))
        except Exception:  # noqa: BLE001, S110 - the stdout side reports link failures
            pass
        finally:
            if not self.pgid.done():
                self.pgid.set_result(None)

    def text(self) -> str:
        return "".join(self.lines)

    def last_line(self) -> str:
        return self.tail[-1] if self.tail else ""
