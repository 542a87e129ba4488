"""The models on this node: what the Hugging Face cache and the profile's model folders hold.

`node_agent.py models list|config` (stdlib, Python >= 3.8). The cache is read with
huggingface_hub's own scanner (`scan_cache_dir`), which vLLM already brings; nothing here
walks the cache layout: only a snapshot folder the scanner named is opened, for its
config.json and its safetensors index. Without huggingface_hub the op says so in one line.
A local model folder (the profile's model_dirs, or a path given as the model) is read
directly: it is a plain folder with a config.json, no cache layout.
"""

import json
import os
import sys

MISSING_HUB = "huggingface_hub missing: install it on the node (vLLM depends on it) to read the Hugging Face cache"
INDEX = "model.safetensors.index.json"
_CONFIG_LIMIT = 4 * 1024 * 1024  # a config.json is a few KiB; anything bigger is not one


class ModelsError(Exception):
    """One line for the console."""


def _scan(cache_dir):
    try:
        from huggingface_hub import scan_cache_dir  # type: ignore[import-not-found]  # on the node, not here
    except ImportError:
        raise ModelsError(MISSING_HUB) from None
    try:
        return scan_cache_dir(cache_dir) if cache_dir else scan_cache_dir()
    except Exception as exc:  # CacheNotFound (no cache yet) and unreadable folders
        if type(exc).__name__ == "CacheNotFound":
            return None
        raise ModelsError("the Hugging Face cache could not be read: %s" % exc) from None


def _read_json(path):
    try:
        if os.path.getsize(path) > _CONFIG_LIMIT:
            return None
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _completeness(folder, names):
    """(complete, why not): config.json there, and every shard the index lists (or a weights file)."""
    if "config.json" not in names:
        return False, "no config.json"
    index = _read_json(os.path.join(folder, INDEX)) if INDEX in names else None
    if index is not None:
        shards = set((index.get("weight_map") or {}).values())
        missing = sorted(s for s in shards if s not in names)
        if missing:
            return False, "%d of %d weight files missing" % (len(missing), len(shards))
        return True, None
    if any(n.endswith((".safetensors", ".bin", ".pt", ".gguf")) for n in names):
        return True, None
    return False, "no weight files"


def _free(path):
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    try:
        st = os.statvfs(path or "/")
    except OSError:
        return None
    return {"path": path, "free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize}


def _cache_records(info):
    out = []
    # partial downloads the scanner found (huggingface_hub >= 1.x): which repo folder holds each
    partial = [str(f.file_path) for f in getattr(info, "incomplete_files", None) or ()]
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        pulling = any(p.startswith(str(repo.repo_path) + os.sep) for p in partial)
        for rev in sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True):
            names = set(f.file_name for f in rev.files)
            complete, why = _completeness(str(rev.snapshot_path), names)
            if pulling and complete:
                complete, why = False, "a download was interrupted"
            elif pulling:
                why += "; a download was interrupted"
            out.append(
                {
                    "kind": "model",
                    "name": repo.repo_id,
                    "source": "hf-cache",
                    "path": str(rev.snapshot_path),
                    "revision": rev.commit_hash,
                    "refs": sorted(rev.refs),
                    "size_bytes": int(rev.size_on_disk),
                    "files": len(names),
                    "complete": complete,
                    "incomplete_reason": why,
                }
            )
    return out


def _local_records(model_dirs):
    out = []
    for base in model_dirs:
        try:
            entries = sorted(os.listdir(base))
        except OSError:
            continue
        for entry in entries:
            folder = os.path.join(base, entry)
            out.extend(_local_one(folder, entry))
    return out


def _local_one(folder, name):
    try:
        names = set(os.listdir(folder))
    except OSError:
        return []
    if "config.json" not in names and INDEX not in names:
        return []
    size = 0
    for n in names:
        try:
            size += os.path.getsize(os.path.join(folder, n))
        except OSError:
            pass
    complete, why = _completeness(folder, names)
    return [
        {
            "kind": "model",
            "name": name,
            "source": "dir",
            "path": folder,
            "revision": None,
            "refs": [],
            "size_bytes": size,
            "files": len(names),
            "complete": complete,
            "incomplete_reason": why,
        }
    ]


def _unfinished_pulls(state_dir):
    """[(repo, its `--to` folder or None, why)] of the pulls here that did not finish (failed,
    stopped): their model is never listed complete, whatever files they left (W2: a pull that
    ended on a full disk can leave shards without the index, which reads as a whole model)."""
    if not state_dir:
        return []
    try:
        pulls = list_pulls(state_dir)
    except Exception:  # no pulls folder, an unreadable one: nothing to hold against the models
        return []
    out = []
    for p in pulls:
        if p["state"] == "failed":
            out.append((p["model"], p.get("to"), "its pull failed: %s" % p["error"]))
        elif p["state"] == "stopped":
            out.append((p["model"], p.get("to"), "its pull was stopped; `models pull` again resumes it"))
    return out


def _mark_unfinished(records, unfinished):
    for rec in records:
        if rec.get("kind") != "model":
            continue
        for repo, to, why in unfinished:
            if (to is None and rec["source"] == "hf-cache" and rec["name"] == repo) or (
                to is not None and rec["path"] == to
            ):
                rec["incomplete_reason"] = "%s; %s" % (rec["incomplete_reason"], why) if not rec["complete"] else why
                rec["complete"] = False
    return records


def list_models(cache_dir=None, model_dirs=(), state_dir=None):
    """Every model record, then one `space` record per filesystem; raises ModelsError."""
    records = []
    hub_error = None
    info = None
    try:
        info = _scan(cache_dir)
    except ModelsError as exc:
        hub_error = str(exc)
    if info is not None:
        records.extend(_cache_records(info))
    records.extend(_local_records(model_dirs))
    _mark_unfinished(records, _unfinished_pulls(state_dir))
    where = cache_dir
    if info is not None and info.repos:  # the scanner's own folder (HF_HUB_CACHE / HF_HOME resolved)
        where = str(next(iter(info.repos)).repo_path.parent)
    places = [p for p in [where] + list(model_dirs) if p]
    simulated = getattr(sys.modules.get("huggingface_hub"), "simulated_free_space", None)
    for place in places:
        free = _free(place)
        if simulated is not None and place == where and free is not None:  # a simulated node's model disk
            free["free_bytes"], _ = simulated(place)
            free["total_bytes"] = getattr(sys.modules["huggingface_hub"], "SIM_DISK_BYTES", free["total_bytes"])
        if free is not None:
            records.append(dict(free, kind="space", place=place))
    if hub_error:
        records.append({"kind": "warning", "message": hub_error})
    return records


def find_config(model, cache_dir=None, model_dirs=(), revision=None):
    """{"kind": "config", ...} of `model` (a repo id or a folder); raises ModelsError naming it."""
    if os.path.isabs(model):
        if not os.path.isdir(model):
            raise ModelsError("model folder %s: not found on the node" % model)
        return _config_record(model, model, None)
    for rec in _local_records(model_dirs):
        if rec["name"] == model:
            return _config_record(model, rec["path"], None)
    info = _scan(cache_dir)
    revs = []
    for repo in info.repos if info is not None else ():
        if repo.repo_type == "model" and repo.repo_id == model:
            revs = sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True)
    if revision:
        revs = [r for r in revs if r.commit_hash.startswith(revision) or revision in r.refs]
    if not revs:
        raise ModelsError(
            "model %s%s: not in the Hugging Face cache on this node" % (model, "@" + revision if revision else "")
        )
    return _config_record(model, str(revs[0].snapshot_path), revs[0].commit_hash)


def _config_record(model, folder, revision):
    config = _read_json(os.path.join(folder, "config.json"))
    if config is None:
        raise ModelsError("model %s: no readable config.json in %s" % (model, folder))
    index = _read_json(os.path.join(folder, INDEX))
    return {"kind": "config", "name": model, "path": folder, "revision": revision, "config": config, "index": index}


def hub_python(vllm):
    """The python of the venv `vllm` runs from (its script's #! line, or a python beside it), or None."""
    import shlex
    import shutil

    try:
        words = shlex.split(vllm or "")
    except ValueError:
        return None
    exe = shutil.which(words[0]) if words else None
    if not exe:
        return None
    candidates = []
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
        if first.startswith("#!"):
            interp = first[2:].split()
            if interp and os.path.basename(interp[0]).startswith("python"):
                candidates.append(interp[0])
    except OSError:
        pass
    candidates.append(os.path.join(os.path.dirname(exe), "python3"))
    for cand in candidates:
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _reexec_with_hub(args, writer):
    """Without huggingface_hub here, run this same op again in the vLLM venv's python (it has
    it: vLLM depends on it). Returns only when there is no such python."""
    try:
        import huggingface_hub  # noqa: F401 - on the node

        return
    except ImportError:
        pass
    if os.environ.get(_REEXEC_ENV) or not getattr(args, "vllm", None):
        return
    python = hub_python(args.vllm)
    # a venv's python links to its base interpreter: compare the paths, not where they lead
    if not python or os.path.abspath(python) == os.path.abspath(sys.executable):
        return
    os.environ[_REEXEC_ENV] = "1"
    try:
        writer.stream.flush()
        os.dup2(writer.stream.fileno(), 1)  # the JSON stream back on fd 1 for the new process
    except (AttributeError, OSError, ValueError):
        return
    os.execv(python, [python] + sys.argv)


_REEXEC_ENV = "ROCM_CONSOLE_HUB_REEXEC"


def _secrets():
    """{"token", "endpoint"} sent on stdin by the console (never argv)."""
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def run(args, writer):
    """`models list|config|pull|pulls|rm`: JSON lines; an error line and exit 2 on failure."""
    dirs = list(args.model_dir or [])
    if not args.vllm:  # a simulated node's huggingface_hub lives beside its amdsmi; with --vllm, the real one
        for path in reversed(args.amdsmi_path or []):
            if path not in sys.path:
                sys.path.insert(0, path)
    if args.op in ("list", "config", "pull", "rm"):
        _reexec_with_hub(args, writer)
    try:
        if args.op == "list":
            for rec in list_models(args.cache_dir, dirs, args.state_dir):
                writer.write(rec)
        elif args.op == "config":
            writer.write(find_config(args.model, args.cache_dir, dirs, args.revision))
        elif args.op == "pull":
            writer.write(start_pull(args, _secrets()))
        elif args.op == "pulls":
            for rec in list_pulls(args.state_dir):
                writer.write(rec)
        else:
            writer.write(remove_model(args.model, args.cache_dir, args.revision, args.state_dir))
    except ModelsError as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return 2
    return 0


# ------------------------------------------------------------------ pulls and removal


def _hub():
    try:
        import huggingface_hub  # on the node, not here
    except ImportError:
        raise ModelsError(MISSING_HUB) from None
    return huggingface_hub


def _pulls_group():
    import supervisor  # shipped beside this file

    supervisor.GROUP = "pulls"  # supervised like instances, in their own folder
    return supervisor


def pull_status(state_dir, name):
    """One pull's record: state (running / done / failed / stopped), bytes, total, rate, ETA."""
    import model_pull  # shipped beside this file
    from statefiles import read_json  # shipped beside this file

    sup = _pulls_group()
    rec = sup.describe(state_dir, name)
    folder = sup.instance_dir(state_dir, name)
    pull = rec["spec"].get("pull") or {}
    result = read_json(os.path.join(folder, model_pull.RESULT))
    error = read_json(os.path.join(folder, model_pull.ERROR))
    progress = read_json(os.path.join(folder, model_pull.PROGRESS), {}) or {}
    running = rec["state"] in ("running", "starting")
    total = int(pull.get("total_bytes") or 0)
    done, partial = model_pull.present_bytes(pull) if pull.get("files") is not None else (0, 0)
    if running:
        state = "running"
    elif result:
        state = "done"
    elif error:
        state = "failed"
    else:
        state = "stopped"  # killed (or the node rebooted): `models pull` again resumes it
    return {
        "kind": "pull",
        "name": name,
        "model": pull.get("repo"),
        "revision": pull.get("commit"),
        "state": state,
        "pid": rec["pid"],
        "started": rec["started"],
        "ended": rec["ended"],
        "bytes": min(total, done + partial) if running else min(total, done),
        "total_bytes": total,
        "files": len(pull.get("files") or ()),
        "rate": progress.get("rate") if running else None,
        "eta": progress.get("eta") if running else None,
        "target": pull.get("local_dir") or pull.get("cache_dir"),
        "to": pull.get("local_dir"),
        "path": (result or {}).get("path"),
        "error": (error or {}).get("message"),
        "exit_code": rec["exit_code"],
    }


def list_pulls(state_dir):
    sup = _pulls_group()
    return [pull_status(state_dir, r["name"]) for r in sup.list_instances(state_dir)]


def start_pull(args, secrets):
    """Start (or re-attach to) the pull of args.model; refused in one line when it cannot fit."""
    import model_pull  # shipped beside this file

    sup = _pulls_group()
    name = model_pull.pull_name(args.model)
    state_dir = args.state_dir
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isfile(os.path.join(sup.instance_dir(state_dir, name), "spec.json")):
        current = pull_status(state_dir, name)
        if args.cancel:  # W2: only a running pull is cancelled; any other says its real state
            cancelled = current["state"] == "running"
            if cancelled:
                sup.stop(state_dir, name, int_timeout=5.0, term_timeout=5.0)
                current = pull_status(state_dir, name)
            current["cancelled"] = cancelled
            return current
        if current["state"] == "running":
            current["attached"] = True  # the same pull, still going: follow it
            return current
    elif args.cancel:
        raise ModelsError("model %s: no pull of it on this node" % args.model)
    if os.path.isabs(args.model):
        raise ModelsError("model %s: a folder on the node is not pulled (give a hub repo id)" % args.model)
    hub = _hub()
    token = secrets.get("token") or os.environ.get("HF_TOKEN") or None
    endpoint = secrets.get("endpoint") or os.environ.get("HF_ENDPOINT") or None
    try:
        api = hub.HfApi(endpoint=endpoint) if endpoint else hub.HfApi()
        commit, files = model_pull.repo_files(
            api, args.model, args.revision, token, allow=args.include or (), ignore=args.exclude or ()
        )
    except Exception as exc:  # the hub's reason (missing, gated, wrong token, unreachable)
        reason = model_pull.scrub(model_pull.hub_reason(exc, endpoint), token)
        raise ModelsError("model %s: %s" % (args.model, reason)) from None
    if not files:
        raise ModelsError("model %s: no file of it matches --exclude/--include" % args.model)
    cache_dir = args.cache_dir
    if not cache_dir:
        from huggingface_hub import constants  # on the node

        cache_dir = str(constants.HF_HUB_CACHE)
    pull = {
        "repo": args.model,
        "commit": commit,
        "asked_revision": args.revision,
        "files": files,
        "total_bytes": sum(f["size"] for f in files),
        "allow": list(args.include or ()),
        "ignore": list(args.exclude or ()),
        "cache_dir": None if args.to else os.path.abspath(os.path.expanduser(cache_dir)),
        "local_dir": os.path.abspath(os.path.expanduser(args.to)) if args.to else None,
        "hub_path": []
        if args.vllm
        else list(args.amdsmi_path or ()),  # a simulated node's huggingface_hub, for the worker
    }
    if args.dry_run:  # the size on the hub and what is here already (the serve preflight)
        done, _ = model_pull.present_bytes(pull)
        return {
            "kind": "plan",
            "model": args.model,
            "commit": commit,
            "total_bytes": pull["total_bytes"],
            "have_bytes": done,
        }
    # a simulated node's disk is the simulated hub's figure (its weights are sparse files)
    refusal = model_pull.space_refusal(pull, getattr(hub, "simulated_free_space", None))
    if refusal:
        raise ModelsError(refusal)
    env = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONUNBUFFERED": "1"}
    if token:
        env["HF_TOKEN"] = token  # the supervisor keeps it out of argv and spec.json
    if endpoint:
        env["HF_ENDPOINT"] = endpoint
    folder = sup.instance_dir(state_dir, name)
    spec = {
        "name": name,
        "argv": [sys.executable, os.path.join(here, "model_pull.py"), folder],
        "env": env,
        "pull": pull,
    }
    try:
        sup.start(state_dir, spec, os.path.join(here, "node_agent.py"))
    except sup.SupervisorError as exc:
        raise ModelsError(str(exc)) from None
    rec = pull_status(state_dir, name)
    rec["started_now"] = True
    return rec


def remove_model(model, cache_dir=None, revision=None, state_dir=None):
    """Delete a model's revisions from the cache with huggingface_hub's own delete strategy."""
    import model_pull  # shipped beside this file

    if state_dir:
        sup = _pulls_group()
        name = model_pull.pull_name(model)
        if os.path.isfile(os.path.join(sup.instance_dir(state_dir, name), "spec.json")):
            if pull_status(state_dir, name)["state"] == "running":
                raise ModelsError("model %s: a pull of it is running; cancel it first" % model)
    if os.path.isabs(model):
        raise ModelsError("model %s: a folder, not a cache entry; the console removes cache entries only" % model)
    info = _scan(cache_dir)
    repo = None
    for r in info.repos if info is not None else ():
        if r.repo_type == "model" and r.repo_id == model:
            repo = r
    if repo is None:
        raise ModelsError("model %s: not in the Hugging Face cache on this node" % model)
    revs = [r for r in repo.revisions if not revision or r.commit_hash.startswith(revision) or revision in r.refs]
    if not revs:
        raise ModelsError("model %s@%s: no such revision in the cache" % (model, revision))
    hashes = sorted(r.commit_hash for r in revs)
    strategy = info.delete_revisions(*hashes)
    freed = int(strategy.expected_freed_size)
    strategy.execute()
    return {"kind": "removed", "name": model, "revisions": hashes, "freed_bytes": freed}


def add_parser(modes, parser_class):
    models = modes.add_parser("models", help="the models in the Hugging Face cache and the model folders")
    ops = models.add_subparsers(dest="op", parser_class=parser_class)
    ops.required = True
    for op in ("list", "config", "pull", "pulls", "rm"):
        sub = ops.add_parser(op)
        sub.add_argument("--cache-dir", default=None, help="the hub cache (default: huggingface_hub's)")
        sub.add_argument("--model-dir", action="append", default=[], metavar="DIR", help="a folder of model folders")
        sub.add_argument("--amdsmi-path", action="append", default=[], metavar="DIR")
        sub.add_argument("--vllm", default=None, help="how vllm runs here: its venv's python has huggingface_hub")
        sub.add_argument("--state-dir", default="~/.rocm-console", help="the supervisor's state folder (pulls)")
        if op in ("config", "pull", "rm"):
            sub.add_argument("model")
            sub.add_argument("--revision", default=None)
        if op == "pull":
            sub.add_argument("--exclude", action="append", default=[], metavar="GLOB")
            sub.add_argument("--include", action="append", default=[], metavar="GLOB")
            sub.add_argument("--to", default=None, metavar="DIR", help="a plain folder instead of the cache")
            sub.add_argument("--cancel", action="store_true", help="stop the running pull (it can resume later)")
            sub.add_argument("--dry-run", action="store_true", help="only the size on the hub")
