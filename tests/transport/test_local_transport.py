import asyncio
import os
import sys

import pytest

from console.transport.base import TransportError
from console.transport.local import LocalTransport

PY = sys.executable


async def test_run_passes_arguments_literally(tmp_path):
    t = LocalTransport("n")
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}); `touch {marker}` ' \" \n;"
    res = await t.run([PY, "-c", "import sys; print(sys.argv[1], end='')", evil])
    assert res.ok and res.stdout == evil
    assert not marker.exists()


async def test_run_env_and_input():
    t = LocalTransport("n")
    res = await t.run(
        [PY, "-c", "import os,sys; print(os.environ['X_TEST'] + sys.stdin.read())"], env={"X_TEST": "a b"}, input="-in"
    )
    assert res.stdout.strip() == "a b-in"


async def test_run_timeout_kills_the_command():
    t = LocalTransport("n")
    with pytest.raises(TransportError) as err:
        await t.run([PY, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert err.value.kind == "timeout" and "timed out" in str(err.value)


async def test_missing_program_is_a_one_line_error():
    t = LocalTransport("n")
    with pytest.raises(TransportError, match="n: cannot run /no/such/prog"):
        await t.run(["/no/such/prog"])


async def test_stream_lines_and_failure_reason():
    t = LocalTransport("n")
    lines = [ln async for ln in t.stream_lines([PY, "-c", "print('a'); print('b')"])]
    assert lines == ["a", "b"]
    with pytest.raises(TransportError, match="exited 3: boom"):
        async for _ in t.stream_lines([PY, "-c", "import sys; print('x'); sys.stderr.write('boom\\n'); sys.exit(3)"]):
            pass


async def test_stream_closed_early_stops_the_process(tmp_path):
    t = LocalTransport("n")
    pidfile = tmp_path / "pid"
    code = f"import os,time; open({str(pidfile)!r},'w').write(str(os.getpid()))\nwhile True: print('tick', flush=True); time.sleep(0.05)"
    stream = t.stream_lines([PY, "-c", code])
    async for _ in stream:
        break
    await stream.aclose()
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("streamed process still alive after close")


async def test_spawn_detached_and_upload(tmp_path):
    t = LocalTransport("n")
    log = tmp_path / "logs" / "out.log"
    pid = await t.spawn_detached([PY, "-c", "print('hello from detached')"], log_path=str(log))
    assert pid > 0
    for _ in range(100):
        if log.exists() and "hello" in log.read_text():
            break
        await asyncio.sleep(0.05)
    assert "hello from detached" in log.read_text()
    target = tmp_path / "a" / "b" / "file.py"
    await t.upload(b"data", str(target), mode=0o600)
    assert target.read_bytes() == b"data" and (target.stat().st_mode & 0o777) == 0o600
    fwd = await t.forward_port(8000)
    assert fwd.local_port == 8000
