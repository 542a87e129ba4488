"""Pulls of models onto this node: huggingface_hub's own downloader, detached under the supervisor.

Runs ON the node (stdlib, Python >= 3.8) in the python that has huggingface_hub (the vLLM
venv's on a real node; models.py finds it). `models pull` (node_agent.py) asks the hub for the
repository's files and sizes, checks the free space of the target filesystem, and starts
this file as a supervised run in `<state_dir>/pulls/<name>/` (supervisor.py, the same
mechanism that keeps `vllm serve` alive across a dropped link): it survives the console
and the SSH session. The worker (`python model_pull.py FOLDER`) calls `snapshot_download`;
huggingface_hub skips every file already complete in the cache, so a pull started again after
a kill fetches only what is missing. Progress is measured, never reported by a home-made
client: the sizes of the pull's files present in the target (and the `.incomplete` files
huggingface_hub is writing), sampled by a thread of the worker into progress.json.

HF_TOKEN reaches the worker only through the supervisor's private environment file (never
argv, spec.json or a log line); every message is scrubbed of it.
"""

import errno
import fnmatch
import hashlib
import os
import re
import sys
import threading
import time

PROGRESS = "progress.json"
RESULT = "result.json"
ERROR = "error.json"
SAMPLE_S = 0.5
RATE_WINDOW_S = 10.0
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


class PullError(Exception):
    """One line for the console (the hub's own reason when it gave one)."""


def pull_name(repo_id):
    """The supervised run's name: `pull-org--name`, shortened with a hash past 64 characters."""
    name = "pull-" + _NAME_BAD.sub("-", repo_id.replace("/", "--"))
    if len(name) > 64:
        name = name[:55] + "-" + hashlib.sha256(repo_id.encode()).hexdigest()[:8]
    return name


def scrub(text, secret):
    text = str(text)
    return text.replace(secret, "***") if secret else text


def hub_reason(exc, endpoint=None):
    """The hub's own reason in one line: its status line and message, or why it was not reached."""
    name = type(exc).__name__
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("For more details", "For more information"))]
    text = " ".join(lines[:2]) or name
    if name in ("ConnectError", "ConnectTimeout", "ConnectionError", "ReadTimeout", "TimeoutException"):
        return "the hub %s is unreachable: %s" % (endpoint or "huggingface.co", text)
    if name == "GatedRepoError":
        return "gated model (request access on the hub, then set HF_TOKEN): " + text
    if name == "OfflineModeIsEnabled":
        return "HF_HUB_OFFLINE is set on the node: " + text
    return text[:400]


# ------------------------------------------------------------------ what to fetch


def _matches(path, patterns):
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.rstrip("/") + "/*") for p in patterns)


def repo_files(api, repo_id, revision, token, allow=(), ignore=()):
    """(commit, [{"path", "size", "blob"}]) of the repository at `revision`, filtered as the pull is.

    model_info(files_metadata=True) gives each file's size and hash on the hub; a mirror that
    leaves them out (olah's local repositories) is asked for the tree instead."""
    info = api.model_info(repo_id, revision=revision or "main", files_metadata=True, token=token)
    commit = info.sha
    entries = []
    siblings = list(info.siblings or ())
    if siblings and all(getattr(s, "size", None) is not None for s in siblings):
        for s in siblings:
            lfs = getattr(s, "lfs", None)
            sha = getattr(lfs, "sha256", None) if lfs is not None else None
            if sha is None and isinstance(lfs, dict):
                sha = lfs.get("sha256")
            entries.append((s.rfilename, int(s.size), sha or getattr(s, "blob_id", None)))
    else:
        for item in api.list_repo_tree(repo_id, revision=commit, recursive=True, token=token):
            size = getattr(item, "size", None)
            if size is None:
                continue  # a folder
            lfs = getattr(item, "lfs", None)
            sha = getattr(lfs, "sha256", None) if lfs is not None else None
            if sha is None and isinstance(lfs, dict):
                sha = lfs.get("sha256")
            entries.append((item.path, int(size), sha or getattr(item, "blob_id", None)))
    files = []
    for path, size, blob in sorted(entries):
        if allow and not _matches(path, allow):
            continue
        if ignore and _matches(path, ignore):
            continue
        files.append({"path": path, "size": size, "blob": blob})
    return commit, files


def repo_cache_folder(cache_dir, repo_id):
    """huggingface_hub's folder for a model repository in its cache (its own naming rule)."""
    return os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))


def present_bytes(pull):
    """(bytes of the pull's files already complete, bytes in partial downloads) in its target."""
    done = 0
    partial = 0
    local = pull.get("local_dir")
    if local:
        for f in pull["files"]:
            try:
                st = os.stat(os.path.join(local, f["path"]))
                done += min(st.st_size, f["size"])
            except OSError:
                pass
        partial_root = os.path.join(local, ".cache", "huggingface", "download")
    else:
        repo = repo_cache_folder(pull["cache_dir"], pull["repo"])
        blobs = os.path.join(repo, "blobs")
        for f in pull["files"]:
            if not f.get("blob"):
                continue
            try:
                done += os.stat(os.path.join(blobs, f["blob"])).st_size
            except OSError:
                pass
        partial_root = blobs
    for root, _dirs, names in _walk(partial_root):
        for n in names:
            if n.endswith(".incomplete"):
                try:
                    partial += os.stat(os.path.join(root, n)).st_size
                except OSError:
                    pass
    return done, partial


def _walk(root):
    if not os.path.isdir(root):
        return []
    return os.walk(root)


def free_space(path):
    """(free bytes, the existing folder measured) of the filesystem that will hold `path`."""
    probe = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize, probe


def size_text(n):
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return "%.1f %s" % (n / scale, unit)
    return "%d B" % n


def space_refusal(pull, measure=None):
    """None, or the one line refusing a pull that cannot fit the target's filesystem.
    `measure(path) -> (free bytes, folder)`: free_space, or a simulated node's own figure."""
    target = pull.get("local_dir") or pull["cache_dir"]
    done, _ = present_bytes(pull)
    needed = max(0, pull["total_bytes"] - done)
    free, where = (measure or free_space)(target)
    if needed > free:
        return "model %s needs %s more (%s in all), %s has %s free" % (
            pull["repo"],
            size_text(needed),
            size_text(pull["total_bytes"]),
            where,
            size_text(free),
        )
    return None


_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def disk_full(exc):
    """The OSError of a full disk (no space, quota, file size limit) behind `exc`, or None:
    huggingface_hub may raise it as is or wrapped (its cause or context)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def disk_full_reason(pull, exc):
    """One line: where the disk filled, how much of the pull is there, what is kept, what to do."""
    target = pull.get("local_dir") or pull.get("cache_dir") or "?"
    try:
        free = size_text(free_space(target)[0])
    except OSError:
        free = "?"
    done, _ = present_bytes(pull)
    return (
        "the disk filled at %s (%s, %s free): %s of %s pulled; the complete files are kept and the partial"
        " one removed: free space, then `models pull` again resumes it"
        % (
            target,
            exc.strerror or os.strerror(exc.errno),
            free,
            size_text(done),
            size_text(pull.get("total_bytes") or 0),
        )
    )


def remove_stale_partials(pull):
    """A killed pull's `.incomplete` files: huggingface_hub (>= 1.x) names them per process and
    never reuses one, so they only waste space; this pull's run is the only writer of its repo."""
    if pull.get("local_dir"):
        root = os.path.join(pull["local_dir"], ".cache", "huggingface", "download")
    else:
        root = os.path.join(repo_cache_folder(pull["cache_dir"], pull["repo"]), "blobs")
    for folder, _dirs, names in _walk(root):
        for n in names:
            if n.endswith(".incomplete"):
                try:
                    os.unlink(os.path.join(folder, n))
                except OSError:
                    pass


# ------------------------------------------------------------------ progress


def progress_record(pull, history, now):
    """{"bytes", "total", "partial", "rate", "eta"}: bytes from the disk, rate over the last seconds."""
    done, partial = present_bytes(pull)
    have = min(pull["total_bytes"], done + partial)
    history.append((now, have))
    while len(history) > 2 and now - history[0][0] > RATE_WINDOW_S:
        history.pop(0)
    rate = None
    if len(history) >= 2 and history[-1][0] > history[0][0]:
        rate = max(0.0, (history[-1][1] - history[0][1]) / (history[-1][0] - history[0][0]))
    left = pull["total_bytes"] - have
    eta = left / rate if rate else None
    return {"bytes": have, "complete_bytes": done, "total": pull["total_bytes"], "rate": rate, "eta": eta, "time": now}


def _sampler(folder, pull, stop):
    from statefiles import write_json  # shipped beside this file

    history = []
    while not stop.is_set():
        try:
            write_json(os.path.join(folder, PROGRESS), progress_record(pull, history, time.time()))
        except OSError:
            pass
        stop.wait(SAMPLE_S)


# ------------------------------------------------------------------ the worker


def worker(folder):
    """Run one pull: snapshot_download into the cache (or a folder), progress beside it."""
    from statefiles import read_json, write_json  # shipped beside this file

    spec = read_json(os.path.join(folder, "spec.json"), {}) or {}
    pull = spec.get("pull") or {}
    for path in reversed(pull.get("hub_path") or ()):
        if path not in sys.path:
            sys.path.insert(0, path)
    token = os.environ.get("HF_TOKEN") or None
    endpoint = os.environ.get("HF_ENDPOINT") or None
    for stale in (RESULT, ERROR):
        try:
            os.unlink(os.path.join(folder, stale))
        except OSError:
            pass
    remove_stale_partials(pull)
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(folder, pull, stop), daemon=True)
    sampler.start()
    try:
        from huggingface_hub import snapshot_download  # type: ignore[import-not-found]  # the node's

        # the revision asked (main by default), so huggingface_hub writes its ref and vLLM finds
        # the model by name offline; the commit resolved at the start is what the sizes are of
        kwargs = {"revision": pull.get("asked_revision") or "main", "token": token}
        if pull.get("allow"):
            kwargs["allow_patterns"] = list(pull["allow"])
        if pull.get("ignore"):
            kwargs["ignore_patterns"] = list(pull["ignore"])
        if pull.get("local_dir"):
            kwargs["local_dir"] = pull["local_dir"]
        else:
            kwargs["cache_dir"] = pull["cache_dir"]
        if endpoint:
            kwargs["endpoint"] = endpoint
        path = snapshot_download(pull["repo"], **kwargs)
    except Exception as exc:  # the hub's reason, one line, for `models pulls`
        full = disk_full(exc)
        if full is not None:  # the partial file is never resumed: its space goes back now
            remove_stale_partials(pull)
            message = disk_full_reason(pull, full)
        else:
            message = scrub(hub_reason(exc, endpoint), token)
        write_json(os.path.join(folder, ERROR), {"message": message})
        sys.stderr.write("rocm-console: pull failed: %s\n" % message)
        return 1
    finally:
        stop.set()
        sampler.join(2)
    history = []
    write_json(os.path.join(folder, PROGRESS), progress_record(pull, history, time.time()))
    write_json(os.path.join(folder, RESULT), {"path": str(path)})
    sys.stderr.write("rocm-console: pulled %s into %s\n" % (pull["repo"], path))
    return 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    sys.exit(worker(sys.argv[1]))
