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


def list_models(cache_dir=None, model_dirs=()):
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
    where = cache_dir
    if info is not None and info.repos:  # the scanner's own folder (HF_HUB_CACHE / HF_HOME resolved)
        where = str(next(iter(info.repos)).repo_path.parent)
    places = [p for p in [where] + list(model_dirs) if p]
    for place in places:
        free = _free(place)
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


def run(args, writer):
    """`models list` / `models config MODEL`: JSON lines; an error line and exit 2 on failure."""
    dirs = list(args.model_dir or [])
    for path in reversed(args.amdsmi_path or []):  # a simulated node's huggingface_hub lives beside its amdsmi
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        if args.op == "list":
            for rec in list_models(args.cache_dir, dirs):
                writer.write(rec)
        else:
            writer.write(find_config(args.model, args.cache_dir, dirs, args.revision))
    except ModelsError as exc:
        writer.write({"kind": "error", "message": str(exc)})
        return 2
    return 0


def add_parser(modes, parser_class):
    models = modes.add_parser("models", help="the models in the Hugging Face cache and the model folders")
    ops = models.add_subparsers(dest="op", parser_class=parser_class)
    ops.required = True
    for op in ("list", "config"):
        sub = ops.add_parser(op)
        sub.add_argument("--cache-dir", default=None, help="the hub cache (default: huggingface_hub's)")
        sub.add_argument("--model-dir", action="append", default=[], metavar="DIR", help="a folder of model folders")
        sub.add_argument("--amdsmi-path", action="append", default=[], metavar="DIR")
        if op == "config":
            sub.add_argument("model")
            sub.add_argument("--revision", default=None)
