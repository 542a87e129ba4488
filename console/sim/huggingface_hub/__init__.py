"""A simulated `huggingface_hub` for the demo's nodes: `scan_cache_dir` over a real-layout cache.

The agent's `models` op imports `huggingface_hub` and calls `scan_cache_dir`; on a simulated
node this package (beside the simulated amdsmi) answers instead. The cache it reads is built
in the hub's real layout (`models--org--name/{blobs,refs,snapshots}`, snapshot files linked to
blobs), so the real huggingface_hub reads the same folder the same way
(tests/agent/test_agent_models.py checks that with the real one). On first use under a
simulated node (ROCM_CONSOLE_SIM_DIR set) the folder is filled with the seeds' models:
their real config.json, an index, and sparse weight files of the hub's sizes.

Stdlib only, Python >= 3.8. Only what the agent reads and calls is offered (scanning, model_info,
snapshot_download, delete_revisions).
"""

import collections
import hashlib
import json
import os
import shutil
import tempfile

from . import seed_models

CachedFileInfo = collections.namedtuple("CachedFileInfo", "file_name file_path blob_path size_on_disk")
CachedRevisionInfo = collections.namedtuple(
    "CachedRevisionInfo", "commit_hash snapshot_path size_on_disk files refs last_modified"
)
CachedRepoInfo = collections.namedtuple(
    "CachedRepoInfo", "repo_id repo_type repo_path size_on_disk nb_files revisions last_modified"
)
CachedIncompleteFileInfo = collections.namedtuple("CachedIncompleteFileInfo", "file_path size_on_disk")
HFCacheInfo = collections.namedtuple("HFCacheInfo", "size_on_disk repos warnings incomplete_files")

SIM_DIR_ENV = "ROCM_CONSOLE_SIM_DIR"
SIM_SPEC_ENV = "ROCM_CONSOLE_SIM_SPEC"


class CacheNotFound(Exception):
    pass


class _Path(str):
    """A str with the two Path attributes the agent reads (the scanner returns pathlib paths)."""

    @property
    def parent(self):
        return _Path(os.path.dirname(self))

    @property
    def name(self):
        return os.path.basename(self)


def default_dir():
    sim = os.environ.get(SIM_DIR_ENV)
    if sim:
        hub = os.path.join(sim, "hf-cache", "hub")
        if not os.path.isdir(hub):
            seed_cache(hub, _models_for_node())
        return hub
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def _models_for_node():
    """Which seed models a simulated node holds: the 405B on the 8-GPU SPX nodes (the seeds run it
    on one 8xMI300X or MI355X node), meta's 70B on the MI300X ones, the 70B FP8 pull left
    unfinished on the CPX node."""
    try:
        spec = json.loads(os.environ.get(SIM_SPEC_ENV) or "{}")
    except ValueError:
        spec = {}
    gpu = str(spec.get("gpu") or "MI300X").upper()
    cpx = str(spec.get("compute_partition") or "").upper() == "CPX"
    chosen = []
    for name, commit, text, sizes in seed_models.MODELS:
        if "405B" in name and (cpx or gpu not in ("MI300X", "MI355X")):
            continue
        if name.startswith("meta-llama/") and not gpu.startswith("MI300"):
            continue
        partial = cpx and name == "amd/Llama-3.1-70B-Instruct-FP8-KV"
        chosen.append((name, commit, text, sizes, partial))
    return chosen


def _blob(repo, data_id, size=None, text=None):
    digest = hashlib.sha256(data_id.encode()).hexdigest()
    path = os.path.join(repo, "blobs", digest)
    with open(path, "wb") as fh:
        if text is not None:
            fh.write(text.encode("utf-8"))
        else:
            fh.truncate(size)  # sparse: the hub's size, no disk
    return digest


def seed_cache(hub, models):
    """Write `models` [(name, commit, config text, shard sizes, partial)] into a new cache `hub`."""
    parent = os.path.dirname(hub)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".hub-", dir=parent)
    try:
        for name, commit, text, sizes, partial in models:
            repo = os.path.join(tmp, "models--" + name.replace("/", "--"))
            snap = os.path.join(repo, "snapshots", commit)
            for sub in ("blobs", "refs", snap):
                os.makedirs(os.path.join(repo, sub), exist_ok=True)
            with open(os.path.join(repo, "refs", "main"), "w") as fh:
                fh.write(commit)
            shards = ["model-%05d-of-%05d.safetensors" % (i + 1, len(sizes)) for i in range(len(sizes))]
            index = {"metadata": {"total_size": sum(sizes)}, "weight_map": {"lm_head.weight": shards[-1]}}
            for i, shard in enumerate(shards):
                index["weight_map"]["model.layers.%d.weight" % i] = shard
            files = [("config.json", text, None), ("model.safetensors.index.json", json.dumps(index, indent=2), None)]
            kept = shards[: len(shards) // 2] if partial else shards  # a pull stopped half way
            files += [(s, None, size) for s, size in zip(shards, sizes) if s in kept]
            for fname, body, size in files:
                digest = _blob(repo, name + "/" + fname, size=size, text=body)
                os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snap, fname))
            if partial:  # what an interrupted download leaves in blobs
                _blob(repo, name + "/partial", size=sizes[len(kept)] // 3)
                digest = hashlib.sha256((name + "/partial").encode()).hexdigest()
                os.rename(os.path.join(repo, "blobs", digest), os.path.join(repo, "blobs", digest + ".incomplete"))
        try:
            os.rename(tmp, hub)
        except OSError:  # another agent call seeded it meanwhile
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def scan_cache_dir(cache_dir=None):
    hub = os.path.abspath(os.path.expanduser(cache_dir)) if cache_dir else default_dir()
    if not os.path.isdir(hub):
        raise CacheNotFound("Cache directory not found: %s" % hub)
    repos = []
    incomplete = []
    for entry in sorted(os.listdir(hub)):
        repo = os.path.join(hub, entry)
        if not entry.startswith("models--") or not os.path.isdir(repo):
            continue
        repos.append(_repo(repo, entry))
        blobs = os.path.join(repo, "blobs")
        for blob in sorted(os.listdir(blobs)) if os.path.isdir(blobs) else ():
            if blob.endswith(".incomplete"):
                path = os.path.join(blobs, blob)
                incomplete.append(CachedIncompleteFileInfo(_Path(path), os.stat(path).st_size))
    return _CacheInfo(sum(r.size_on_disk for r in repos), frozenset(repos), [], frozenset(incomplete))


def _repo(repo, entry):
    refs = {}
    refs_dir = os.path.join(repo, "refs")
    for ref in os.listdir(refs_dir) if os.path.isdir(refs_dir) else ():
        with open(os.path.join(refs_dir, ref)) as fh:
            refs.setdefault(fh.read().strip(), set()).add(ref)
    revisions = []
    blob_sizes = {}
    snaps = os.path.join(repo, "snapshots")
    for commit in sorted(os.listdir(snaps)):
        snap = os.path.join(snaps, commit)
        files = []
        for fname in sorted(os.listdir(snap)):
            path = os.path.join(snap, fname)
            blob = os.path.realpath(path)
            st = os.stat(blob)
            blob_sizes[blob] = st.st_size
            files.append(CachedFileInfo(fname, _Path(path), _Path(blob), st.st_size))
        size = sum(blob_sizes[str(f.blob_path)] for f in files)
        mtime = os.stat(snap).st_mtime
        revisions.append(
            CachedRevisionInfo(commit, _Path(snap), size, frozenset(files), frozenset(refs.get(commit, ())), mtime)
        )
    repo_id = entry[len("models--") :].replace("--", "/")
    return CachedRepoInfo(
        repo_id,
        "model",
        _Path(repo),
        sum(blob_sizes.values()),
        len(blob_sizes),
        frozenset(revisions),
        os.stat(repo).st_mtime,
    )


# ------------------------------------------------------------------ pulls and removal
# The simulated hub knows the seeds' models (seed_models.py): model_info gives their files and
# sizes; snapshot_download writes them into the cache as sparse files at a simulated rate, the
# real way round (`<blob>.incomplete` growing, then renamed; finished blobs skipped), so the
# agent's progress, resume and removal read the same folders they read on a real node.

PULL_RATE_ENV = "ROCM_CONSOLE_SIM_PULL_RATE"  # bytes per second of the simulated downloads
DEFAULT_PULL_RATE = 4e9
GATED_PREFIX = "meta-llama/"  # gated on the real hub: a token is needed


SIM_DISK_BYTES = 3840 * 10**9  # a node's simulated NVMe for models (3.84 TB)


def simulated_free_space(path):
    """(free bytes, folder) of the simulated node's model disk: its size less the cache's models."""
    hub = default_dir()
    used = 0
    try:
        used = scan_cache_dir(hub).size_on_disk
    except CacheNotFound:
        pass
    return max(0, SIM_DISK_BYTES - used), hub


class HfHubHTTPError(Exception):
    pass


class RepositoryNotFoundError(HfHubHTTPError):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass


class RevisionNotFoundError(HfHubHTTPError):
    pass


RepoSibling = collections.namedtuple("RepoSibling", "rfilename size blob_id lfs")
ModelInfo = collections.namedtuple("ModelInfo", "id sha siblings")


def _seed(repo_id):
    for name, commit, text, sizes in seed_models.MODELS:
        if name == repo_id:
            return commit, _files(name, text, sizes)
    return None


def _files(name, text, sizes):
    """[(file name, size, blob digest, text or None)] of a seed model, as seed_cache writes them."""
    shards = ["model-%05d-of-%05d.safetensors" % (i + 1, len(sizes)) for i in range(len(sizes))]
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": {"lm_head.weight": shards[-1]}}
    for i, shard in enumerate(shards):
        index["weight_map"]["model.layers.%d.weight" % i] = shard
    index_text = json.dumps(index, indent=2)
    out = [
        ("config.json", len(text.encode("utf-8")), text),
        ("model.safetensors.index.json", len(index_text), index_text),
    ]
    out += [(s, size, None) for s, size in zip(shards, sizes)]
    return [(f, size, hashlib.sha256((name + "/" + f).encode()).hexdigest(), body) for f, size, body in out]


class HfApi(object):
    def __init__(self, endpoint=None, token=None):
        self.endpoint = endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        self.token = token

    def model_info(self, repo_id, revision=None, files_metadata=False, token=None, **_):
        url = "%s/api/models/%s/revision/%s" % (self.endpoint, repo_id, revision or "main")
        found = _seed(repo_id)
        if found is None:
            raise RepositoryNotFoundError(
                "404 Client Error. (simulated hub)\n\nRepository Not Found for url: %s." % url
            )
        if repo_id.startswith(GATED_PREFIX) and not (token or self.token or os.environ.get("HF_TOKEN")):
            raise GatedRepoError(
                "401 Client Error. (simulated hub)\n\nCannot access gated repo for url %s. Access to model %s is"
                " restricted. You must have access to it and be authenticated to access it." % (url, repo_id)
            )
        commit, files = found
        if revision not in (None, "main") and not commit.startswith(revision):
            raise RevisionNotFoundError("404 Client Error. (simulated hub)\n\nRevision Not Found for url: %s." % url)
        siblings = [RepoSibling(f, size, digest, {"sha256": digest}) for f, size, digest, _ in files]
        return ModelInfo(repo_id, commit, siblings)


def snapshot_download(
    repo_id, revision=None, cache_dir=None, local_dir=None, allow_patterns=None, ignore_patterns=None, token=None, **_
):
    import fnmatch
    import time

    found = _seed(repo_id)
    if found is None:
        raise RepositoryNotFoundError("404 Client Error. (simulated hub)\n\nRepository Not Found: %s" % repo_id)
    commit, files = found
    rate = float(os.environ.get(PULL_RATE_ENV) or DEFAULT_PULL_RATE)

    def wanted(f):
        if allow_patterns and not any(fnmatch.fnmatch(f, p) for p in _listed(allow_patterns)):
            return False
        return not (ignore_patterns and any(fnmatch.fnmatch(f, p) for p in _listed(ignore_patterns)))

    hub = os.path.abspath(os.path.expanduser(cache_dir)) if cache_dir else default_dir()
    repo = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", commit)
    for sub in ("blobs", "refs", snap):
        os.makedirs(os.path.join(repo, sub), exist_ok=True)
    with open(os.path.join(repo, "refs", revision or "main"), "w") as fh:
        fh.write(commit)
    for fname, size, digest, body in files:
        if not wanted(fname):
            continue
        blob = os.path.join(repo, "blobs", digest)
        if not os.path.exists(blob):
            part = "%s.%08x.incomplete" % (blob, os.getpid())
            with open(part, "wb") as fh:
                if body is not None:
                    fh.write(body.encode("utf-8"))
                else:
                    done = 0
                    while done < size:  # sparse growth at the simulated rate
                        done = min(size, done + int(rate / 10))
                        fh.truncate(done)
                        time.sleep(0.1)
            os.rename(part, blob)
        link = os.path.join(snap, fname)
        if not os.path.lexists(link):
            os.symlink(os.path.join("..", "..", "blobs", digest), link)
        if local_dir:
            _place(local_dir, fname, size, body)
    return local_dir or snap


def _place(local_dir, fname, size, body):
    """A pulled file in a plain folder (`--to`): its text, or a sparse file of its size (W2: a copy
    of the sparse blob wrote its size for real, 8.5 GB for the 8B model). Written beside and
    renamed, as huggingface_hub does, so a full disk never leaves a short file under its name."""
    os.makedirs(local_dir, exist_ok=True)
    dest = os.path.join(local_dir, fname)
    if os.path.exists(dest):
        return
    part = "%s.%08x.incomplete" % (dest, os.getpid())
    try:
        with open(part, "wb") as fh:
            if body is not None:
                fh.write(body.encode("utf-8"))
            else:
                fh.truncate(size)
        os.rename(part, dest)
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise


def _listed(patterns):
    return [patterns] if isinstance(patterns, str) else list(patterns)


class DeleteCacheStrategy(object):
    def __init__(self, repos, snapshots, blobs, refs, expected_freed_size):
        self.repos, self.snapshots, self.blobs, self.refs = repos, snapshots, blobs, refs
        self.expected_freed_size = expected_freed_size

    def execute(self):
        for path in self.repos + self.snapshots:
            shutil.rmtree(path, ignore_errors=True)
        for path in self.blobs + self.refs:
            try:
                os.unlink(path)
            except OSError:
                pass


class _CacheInfo(HFCacheInfo):
    def delete_revisions(self, *hashes):
        repos, snapshots, blobs, refs, freed = [], [], [], [], 0
        for repo in self.repos:
            gone = [r for r in repo.revisions if r.commit_hash in hashes]
            if not gone:
                continue
            if len(gone) == len(repo.revisions):
                repos.append(str(repo.repo_path))
                freed += repo.size_on_disk
                continue
            kept = set(str(f.blob_path) for r in repo.revisions if r not in gone for f in r.files)
            for rev in gone:
                snapshots.append(str(rev.snapshot_path))
                refs.extend(os.path.join(str(repo.repo_path), "refs", ref) for ref in rev.refs)
                for f in rev.files:
                    if str(f.blob_path) not in kept and str(f.blob_path) not in blobs:
                        blobs.append(str(f.blob_path))
                        freed += f.size_on_disk
        return DeleteCacheStrategy(repos, snapshots, blobs, refs, freed)
