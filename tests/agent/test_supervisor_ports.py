"""Where an instance listens is decided on the node: a port the console chose that is taken there
moves on (node side, where the supervisor starts the server); a port the user gave does not."""

from __future__ import annotations

import json
import os
import signal
import socket

import pytest

from tests.agent.test_supervisor import PY, agent, start, wait_until

# Prints its argv (what the server was told) and waits, as a server would.
SERVER = "import sys, time\nprint('argv', sys.argv[1:], flush=True)\nwhile True: time.sleep(0.1)"


@pytest.fixture
def state(tmp_path):
    yield tmp_path / "state"
    for rec in agent(tmp_path / "state", "list"):  # nothing left running: each group by its pid
        if rec.get("kind") == "instance" and rec["state"] == "running":
            try:
                os.killpg(rec["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_chosen_port_taken_on_the_node_moves_to_a_free_one(state):
    with socket.socket() as taken:  # another program's port, on the loopback only
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        asked = taken.getsockname()[1]
        first = start(state, "a", [PY, "-c", SERVER, "--port", str(asked)], port=asked, port_auto=True)
        # a second start from the same choice (another console's, not yet bound): not the first's port
        second = start(state, "b", [PY, "-c", SERVER, "--port", str(asked)], port=asked, port_auto=True)
    got = first["spec"]["port"]
    assert got != asked and first["spec"]["port_asked"] == asked
    assert first["spec"]["argv"][-2:] == ["--port", str(got)]
    assert second["spec"]["port"] not in (asked, got)
    log = state / "instances" / "a" / "log"
    assert wait_until(lambda: log.exists() and f"'--port', '{got}'" in log.read_text())
    # where the server itself moved on (the simulated vLLM writes it): the record follows
    (state / "instances" / "a" / "port").write_text(f"{got + 7}\n")
    [rec] = [r for r in agent(state, "list") if r.get("name") == "a"]
    assert rec["spec"]["port"] == got + 7 and rec["spec"]["port_asked"] == asked


def test_a_port_the_user_gave_is_kept_and_a_taken_one_refused_in_one_line(state):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        [err] = agent(state, "start", input=json.dumps({"name": "p", "argv": [PY, "-c", "pass"], "port": port}))
    assert err["kind"] == "error"
    assert err["message"] == (
        f"port {port} is already in use on this node (by another program): choose another port, "
        "or leave it out and one is picked"
    )


# Listens on the port it is given from a child process (as vLLM's API server may), then waits.
LISTENER = (
    "import socket, subprocess, sys\n"
    'code = \'import socket, sys, time\\ns = socket.socket()\\ns.bind(("127.0.0.1", int(sys.argv[1])))\\n'
    's.listen(1)\\nprint("listening", flush=True)\\nwhile True: time.sleep(0.1)\'\n'
    "subprocess.call([sys.executable, '-c', code, sys.argv[1]])\n"
)


def test_ports_names_what_the_instances_own_processes_listen_on(state):
    with socket.socket() as other:  # another program's listening port: never the instance's
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        start(state, "srv", [PY, "-c", LISTENER, str(port)])
        log = state / "instances" / "srv" / "log"
        assert wait_until(lambda: log.exists() and "listening" in log.read_text())
        [rec] = agent(state, "ports", "srv")
        assert rec == {"kind": "ports", "name": "srv", "ports": [port]}
    # a container's server runs outside the group: the node cannot tell
    start(state, "box", [PY, "-c", SERVER], container="rocm-console-box")
    assert agent(state, "ports", "box")[0]["ports"] is None
