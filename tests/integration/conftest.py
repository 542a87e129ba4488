"""Fixtures for integration tests against real servers on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from tests.integration.sshd import SSHD, SshServer


@pytest.fixture
def sshd(tmp_path_factory):
    """A running OpenSSH server on 127.0.0.1 (see tests/integration/sshd.py).

    Skipped when /usr/sbin/sshd is missing, except under CI (env CI set),
    where a missing sshd is an error: the CI job must install openssh-server.
    """
    if not os.path.exists(SSHD):
        if os.environ.get("CI"):
            pytest.fail(f"{SSHD} not found but CI is set: install openssh-server", pytrace=False)
        pytest.skip(f"{SSHD} not found (install openssh-server)")
    server = SshServer.create(tmp_path_factory.mktemp("sshd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
