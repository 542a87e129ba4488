"""What `vllm bench serve` prints: stdout/stderr/log helpers and the tracebacks of its failures."""

import os
import sys
import time

from .bench_args import BENCH_REQ_SRC, BENCH_SRC
from .constants import PYLIB, SITE
from .failures import asyncio_run_frame, cli_frames, runner_frame, tb_frame


def _bench_cli_frames():
    """Frames from the `vllm` script down to bench serve's asyncio.run(main_async(args))."""
    return cli_frames("entrypoints/cli/benchmark/serve.py", 22, "main(args)") + tb_frame(
        BENCH_SRC, 2004, "main", "return asyncio.run(main_async(args))", "asyncio.run(main_async(args))"
    )


def _main_task_frames():
    """The event loop running main_async (asyncio.run, no uvloop)."""
    return runner_frame() + tb_frame(
        PYLIB + "/asyncio/base_events.py", 691, "run_until_complete", "return future.result()", "future.result()"
    )


def _bench_main_frames():
    """Frames from the `vllm` script down to main_async."""
    return _bench_cli_frames() + asyncio_run_frame() + _main_task_frames()


def awaiting_benchmark():
    """main_async waiting for benchmark(): where most of bench serve's failures start."""
    return tb_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(", "await benchmark(")


def in_request_func():
    """main_async down to one request: benchmark() gathering the tasks, limited_request_func."""
    return (
        awaiting_benchmark()
        + tb_frame(
            BENCH_SRC,
            1081,
            "benchmark",
            "outputs: list[RequestFuncOutput] = await asyncio.gather(*tasks)",
            "await asyncio.gather(*tasks)",
        )
        + tb_frame(BENCH_SRC, 979, "limited_request_func", "output = await request_func(", "await request_func(")
    )


class BenchFatal(Exception):
    """An exception that ends `vllm bench serve` with a traceback on stderr and exit 1."""

    def __init__(self, frames, last, cause=None):
        Exception.__init__(self, last)
        self.frames = frames
        self.last = last
        self.cause = cause

    def text(self):
        lines = []
        if self.cause:
            lines += self.cause.rstrip("\n").split("\n")
            lines += ["", "The above exception was the direct cause of the following exception:", ""]
        lines += _bench_main_frames() + self.frames + self.last.split("\n")
        return "\n".join(lines) + "\n"


def fatal_in_main_async(line, code, last, caret=None, cause=None):
    return BenchFatal(tb_frame(BENCH_SRC, line, "main_async", code, caret), last, cause)


def _aiohttp_client_frames():
    aio = SITE + "/aiohttp/"
    return tb_frame(
        aio + "client.py", 1756, "__aenter__", "self._resp: _RetType_co = await self._coro", "await self._coro"
    ) + tb_frame(aio + "client.py", 900, "_request", "resp = await handler(req)", "await handler(req)")


def aiohttp_connect_error(host, port, addr, strerror, errno_, where):
    """traceback.format_exception() text of aiohttp's ClientConnectorError (connection refused)."""
    aio = SITE + "/aiohttp/"
    eyes = SITE + "/aiohappyeyeballs/impl.py"
    sel = PYLIB + "/asyncio/selector_events.py"
    kind = {111: "ConnectionRefusedError", 113: "OSError", 101: "OSError"}.get(errno_, "OSError")
    first = (
        ["Traceback (most recent call last):"]
        + tb_frame(
            aio + "connector.py",
            1322,
            "_wrap_create_connection",
            "sock = await aiohappyeyeballs.start_connection(",
            "await aiohappyeyeballs.start_connection(",
        )
        + tb_frame(eyes, 124, "start_connection", "raise first_exception")
        + tb_frame(eyes, 75, "start_connection", "sock = await _connect_sock(", "await _connect_sock(")
        + tb_frame(eyes, 210, "_connect_sock", "await loop.sock_connect(sock, address)")
        + tb_frame(sel, 634, "sock_connect", "return await fut", "await fut")
        + tb_frame(sel, 674, "_sock_connect_cb", "raise OSError(err, f'Connect call failed {address}')")
        + ["%s: [Errno %d] %s" % (kind, errno_, strerror)]
    )
    second = (
        ["Traceback (most recent call last):"]
        + where
        + _aiohttp_client_frames()
        + tb_frame(
            aio + "client.py",
            854,
            "_connect_and_send_request",
            "conn = await self._connector.connect(",
            "await self._connector.connect(",
        )
        + tb_frame(
            aio + "connector.py",
            665,
            "connect",
            "proto = await self._create_connection(req, traces, timeout)",
            "await self._create_connection(req, traces, timeout)",
        )
        + tb_frame(
            aio + "connector.py",
            1263,
            "_create_connection",
            "_, proto = await self._create_direct_connection(req, traces, timeout)",
            "await self._create_direct_connection(req, traces, timeout)",
        )
        + tb_frame(aio + "connector.py", 1641, "_create_direct_connection", "raise last_exc")
        + tb_frame(
            aio + "connector.py",
            1610,
            "_create_direct_connection",
            "transp, proto = await self._wrap_create_connection(",
            "await self._wrap_create_connection(",
        )
        + tb_frame(
            aio + "connector.py",
            1345,
            "_wrap_create_connection",
            "raise client_error(req.connection_key, exc) from exc",
        )
        + [
            "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host %s:%d ssl:default [%s]"
            % (host, port, strerror)
        ]
    )
    return (
        "\n".join(first + ["", "The above exception was the direct cause of the following exception:", ""] + second)
        + "\n"
    )


def aiohttp_disconnected_error(where):
    aio = SITE + "/aiohttp/"
    return (
        "\n".join(
            ["Traceback (most recent call last):"]
            + where
            + _aiohttp_client_frames()
            + tb_frame(aio + "client.py", 871, "_connect_and_send_request", "await resp.start(conn)")
            + tb_frame(
                aio + "client_reqrep.py",
                1129,
                "start",
                "message, payload = await protocol.read()  # type: ignore[union-attr]",
                "await protocol.read()",
            )
            + tb_frame(aio + "streams.py", 703, "read", "await self._waiter")
            + ["aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"]
        )
        + "\n"
    )


def aiohttp_payload_error(where):
    aio = SITE + "/aiohttp/"
    first = (
        ["Traceback (most recent call last):"]
        + tb_frame(
            aio + "client_proto.py",
            145,
            "connection_lost",
            "uncompleted = self._parser.feed_eof()",
            "self._parser.feed_eof()",
        )
        + [
            '  File "aiohttp/_http_parser.pyx", line 620, in aiohttp._http_parser.HttpParser.feed_eof',
            "aiohttp.http_exceptions.TransferEncodingError: 400, message:",
            "  Not enough data to satisfy transfer length header.",
        ]
    )
    second = (
        ["Traceback (most recent call last):"]
        + where
        + tb_frame(aio + "streams.py", 46, "__anext__", "rv = await self.read_func()", "await self.read_func()")
        + tb_frame(aio + "streams.py", 471, "readany", 'await self._wait("readany")')
        + tb_frame(aio + "streams.py", 365, "_wait", "await waiter")
        + [
            "aiohttp.client_exceptions.ClientPayloadError: Response payload is not completed: "
            "<TransferEncodingError: 400, message='Not enough data to satisfy transfer length header.'>"
        ]
    )
    return (
        "\n".join(first + ["", "The above exception was the direct cause of the following exception:", ""] + second)
        + "\n"
    )


def request_where(chat, streaming):
    """The endpoint_request_func.py frame an aiohttp error surfaces in."""
    func = "async_request_openai_chat_completions" if chat else "async_request_openai_completions"
    if streaming:
        return tb_frame(
            BENCH_REQ_SRC, 414 if chat else 237, func, "async for chunk_bytes in response.content.iter_any():"
        )
    return tb_frame(
        BENCH_REQ_SRC,
        410 if chat else 232,
        func,
        "async with session.post(url=api_url, json=payload, headers=headers) as response:",
    )


def python_exception_text(exc, where):
    """Text like traceback.format_exception() for an unexpected client-side exception."""
    name = type(exc).__name__
    mod = type(exc).__module__
    if mod not in ("builtins", "__main__"):
        name = mod + "." + name
    return "\n".join(["Traceback (most recent call last):"] + where + ["%s: %s" % (name, exc)]) + "\n"


def keyboard_interrupt_text(in_requests, chat):
    if in_requests:
        inner = (
            in_request_func()
            + request_where(chat, True)
            + tb_frame(
                SITE + "/aiohttp/streams.py", 46, "__anext__", "rv = await self.read_func()", "await self.read_func()"
            )
            + tb_frame(SITE + "/aiohttp/streams.py", 471, "readany", 'await self._wait("readany")')
            + tb_frame(SITE + "/aiohttp/streams.py", 365, "_wait", "await waiter")
        )
    else:
        inner = awaiting_benchmark() + tb_frame(
            PYLIB + "/asyncio/tasks.py", 665, "sleep", "return await future", "await future"
        )
    first = ["Traceback (most recent call last):"] + _main_task_frames() + inner + ["asyncio.exceptions.CancelledError"]
    second = (
        _bench_cli_frames()
        + asyncio_run_frame()
        + tb_frame(PYLIB + "/asyncio/runners.py", 123, "run", "raise KeyboardInterrupt()")
        + ["KeyboardInterrupt"]
    )
    return (
        "\n".join(first + ["", "During handling of the above exception, another exception occurred:", ""] + second)
        + "\n"
    )


def bench_out(text=""):
    """print() to stdout: block-buffered into a pipe or file, like the real client."""
    try:
        sys.stdout.write(text + "\n")
    except (OSError, ValueError):
        pass


def bench_flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def bench_err(text):
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def bench_log(level, src, msg):
    """vLLM's logger: to stdout, flushed after every record (logging.StreamHandler)."""
    bench_out("(MainProcess pid=%d) %s %s [%s] %s" % (os.getpid(), level, time.strftime("%m-%d %H:%M:%S"), src, msg))
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
