"""The values a dialog was last run with, per dialog, preset and node (issue U2).

One small JSON file beside the results store (`<data dir>/form-memory.json`: the profile's
data folder, the demo's own under --demo), so a dialog opened again, even after a restart,
offers what was used last for that preset on that node and says when. Bounded: at most
MAX_ENTRIES keys (the oldest dropped), MAX_FIELDS fields of at most MAX_VALUE characters
each. Secret-looking `NAME=value` pairs (HF_TOKEN=…) are never written. A file that cannot
be read or is not what this module writes is ignored with one warning (warning()), never an
exception; a file that cannot be written loses only the memory, never the run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from console.core.node_json import loads_document
from console.core.serve.argv import looks_secret
from console.services.data_dir import default_root

FILE_NAME = "form-memory.json"
VERSION = 1
MAX_ENTRIES = 200
MAX_FIELDS = 16
MAX_VALUE = 1000
MAX_BYTES = 1 << 20  # far more than MAX_ENTRIES entries take: a bigger file is not ours

_log = logging.getLogger(__name__)
_WARNED: set[str] = set()  # a broken file is said once per process, not at every dialog
_PAIR_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=")


@dataclass(frozen=True)
class Remembered:
    """What a dialog was last run with: field id -> text, and when (epoch seconds)."""

    values: dict[str, str] = field(default_factory=dict, hash=False)
    at: float = 0.0

    def when(self, now: float | None = None) -> str:
        """'14:02' today, else '3 May 14:02' (local time)."""
        stamp = time.localtime(self.at)
        today = time.localtime(now if now is not None else time.time())
        if stamp[:3] == today[:3]:
            return time.strftime("%H:%M", stamp)
        return f"{stamp.tm_mday} {time.strftime('%b %H:%M', stamp)}"


def memory_path() -> Path:
    """Beside the results store: $ROCM_CONSOLE_DATA_DIR (the demo's folder under --demo)."""
    return default_root().parent / FILE_NAME


def key(dialog: str, preset: str, node: str) -> str:
    return f"{dialog}|{preset}|{node}"


def without_secrets(text: str) -> str:
    """The text with every secret-looking NAME=value item left out (they come from the environment)."""
    kept = [item for item in text.split() if not ((m := _PAIR_RE.match(item)) and looks_secret(m.group(1)))]
    return " ".join(kept) if len(kept) != len(text.split()) else text


class FormMemory:
    """The file, read on first use (a dialog makes one when it opens), written on each remember()."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else memory_path()
        self._entries: dict[str, Remembered] | None = None
        self._warning: str | None = None

    # ------------------------------------------------------------ reading

    def _load(self) -> dict[str, Remembered]:
        if self._entries is not None:
            return self._entries
        self._entries = {}
        try:
            if self.path.stat().st_size > MAX_BYTES:
                raise ValueError(f"larger than {MAX_BYTES} bytes")
            data = loads_document(self.path.read_text(encoding="utf-8"))  # W2: depth-safe
            if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
                raise ValueError("not a form memory file (no entries)")
            for name, entry in data["entries"].items():
                values = entry.get("values") if isinstance(entry, dict) else None
                at = entry.get("at") if isinstance(entry, dict) else None
                if not isinstance(name, str) or not isinstance(values, dict) or not isinstance(at, (int, float)):
                    raise ValueError(f"entry {name!r} is not {{values, at}}")
                kept = {str(k): str(v)[:MAX_VALUE] for k, v in list(values.items())[:MAX_FIELDS] if isinstance(v, str)}
                self._entries[name] = Remembered(kept, float(at))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            self._entries = {}
            self._warning = f"{self.path}: ignored, the dialogs start from the presets ({exc})"
            if self._warning not in _WARNED:
                _log.warning(self._warning)
        return self._entries

    def recall(self, dialog: str, preset: str, node: str) -> Remembered | None:
        return self._load().get(key(dialog, preset, node))

    def warning(self) -> str | None:
        """The one line saying the file was ignored: once per file and process, then None."""
        self._load()
        if self._warning is None or self._warning in _WARNED:
            return None
        _WARNED.add(self._warning)
        return self._warning

    # ------------------------------------------------------------ writing

    def remember(self, dialog: str, preset: str, node: str, values: Mapping[str, str]) -> None:
        """Keep `values` (blank ones too: a field cleared stays cleared) as the last used; the
        oldest entries go past MAX_ENTRIES. A write that fails is logged, never raised."""
        entries = self._load()
        kept = {str(k): without_secrets(str(v))[:MAX_VALUE] for k, v in list(values.items())[:MAX_FIELDS]}
        name = key(dialog, preset, node)
        entries.pop(name, None)
        entries[name] = Remembered(kept, time.time())
        while len(entries) > MAX_ENTRIES:
            entries.pop(min(entries, key=lambda k: entries[k].at))
        data = {"version": VERSION, "entries": {k: {"values": e.values, "at": e.at} for k, e in entries.items()}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".form-memory-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(data, out, indent=1, sort_keys=True)
                os.replace(tmp, self.path)  # atomic: a reader sees the old file or the new one
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            _log.warning("%s: not written (%s): the dialogs forget this run's values", self.path, exc)
