"""W2: values that start with `-` reach the node agent over a real OpenSSH sshd as values.

`models pull -- --help` once printed the agent's own help: the model id reached the agent's
option parser. Here the console's argv goes through sshd's shell (shlex.join) to the agent of
a simulated node, and each dash-leading value comes back in the node's own answer.
"""

from __future__ import annotations

import pytest

from tests.integration.test_named_things_over_ssh import cli, one_line
from tests.integration.test_status_over_ssh import write_profile

MODEL = "amd/Llama-3.1-8B-Instruct-FP8-KV"


@pytest.mark.timeout(300)
def test_dash_values_arrive_as_values_over_real_sshd(sshd, tmp_path):
    profile = str(write_profile(tmp_path / "lab.toml", sshd, compute="CPX"))
    base = ("--profile", profile, "--node", "ssh-node")

    helped = cli(tmp_path, "models", "pull", *base, "--", "--help")
    assert helped.returncode == 2 and "usage:" not in helped.stdout + helped.stderr, helped.stdout + helped.stderr
    line = one_line(helped)
    assert line.startswith("rocm-console: ssh-node: model --help: ") and "Repository Not Found" in line, line

    rev = cli(tmp_path, "models", "pull", MODEL, *base, "--revision=--cancel")
    assert rev.returncode == 2, rev.stdout + rev.stderr
    line = one_line(rev)
    assert "Revision Not Found" in line and "/revision/--cancel" in line, line

    cancel = cli(tmp_path, "models", "pull", *base, "--cancel", "--", "-h")
    assert cancel.returncode == 1, cancel.stdout + cancel.stderr
    assert one_line(cancel) == "rocm-console: ssh-node: model -h: no pull of it on this node"

    rm = cli(tmp_path, "models", "rm", *base, "--yes", "--", "--dry-run")
    assert rm.returncode == 1, rm.stdout + rm.stderr
    assert one_line(rm) == "rocm-console: ssh-node: model --dry-run: not in the Hugging Face cache on this node"
