"""The bench client's HTTP: keep-alive connections over asyncio streams, aiohttp-like errors."""

import asyncio
import sys
from urllib.parse import urlsplit

from .bench_output import (
    aiohttp_connect_error,
    aiohttp_disconnected_error,
    aiohttp_payload_error,
)


class BenchHttpError(Exception):
    """How a request failed on the wire, rendered like aiohttp's exception text."""

    def __init__(self, kind, host=None, port=None, exc=None):
        Exception.__init__(self, kind)
        self.kind = kind
        self.host = host
        self.port = port
        self.exc = exc

    def message(self):
        """str() of the aiohttp exception."""
        if self.kind == "connect":
            return "Cannot connect to host %s:%d ssl:default [%s]" % (self.host, self.port, self._strerror())
        if self.kind == "disconnected":
            return "Server disconnected"
        return (
            "Response payload is not completed: <TransferEncodingError: 400, message='Not enough data to "
            "satisfy transfer length header.'>"
        )

    def _strerror(self):
        exc = self.exc
        if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
            return exc.strerror
        return str(exc)

    def text(self, where_post, where_stream):
        if self.kind == "connect":
            errno_ = getattr(self.exc, "errno", None) or 111
            return aiohttp_connect_error(self.host, self.port, None, self._strerror(), errno_, where_post)
        if self.kind == "disconnected":
            return aiohttp_disconnected_error(where_post)
        return aiohttp_payload_error(where_stream)


class _Conn(object):
    __slots__ = ("reader", "writer", "key")

    def __init__(self, reader, writer, key):
        self.reader = reader
        self.writer = writer
        self.key = key

    def close(self):
        try:
            self.writer.close()
        except Exception:
            pass


def join_host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class BenchHttp(object):
    """A small keep-alive HTTP/1.1 client on asyncio streams (what aiohttp does for the real one)."""

    def __init__(self, ssl_context=None):
        self.ssl_context = ssl_context
        self.idle = {}
        self.open = set()

    def close_all(self):
        for conn in list(self.open):
            conn.close()
        self.open.clear()
        self.idle.clear()

    async def _connect(self, key):
        scheme, host, port = key
        ctx = None
        if scheme == "https":
            ctx = self.ssl_context
            if ctx is None:
                import ssl

                ctx = ssl.create_default_context()
        try:
            reader, writer = await asyncio.open_connection(host, port, ssl=ctx, limit=1 << 22)
        except (OSError, asyncio.TimeoutError) as exc:
            raise BenchHttpError("connect", host, port, exc) from None
        conn = _Conn(reader, writer, key)
        self.open.add(conn)
        return conn

    def _drop(self, conn):
        self.open.discard(conn)
        conn.close()

    async def request(self, method, url, headers=None, body=b"", on_data=None):
        """Returns (status, reason, body); for a 200 with on_data, each body piece goes to on_data
        as it arrives instead. Raises BenchHttpError."""
        parts = urlsplit(url)
        scheme = (parts.scheme or "http").lower()
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        lines = [
            "%s %s HTTP/1.1" % (method, target),
            "Host: %s" % join_host_port(host, port),
            "User-Agent: Python/%d.%d aiohttp/3.13.2" % sys.version_info[:2],
            "Accept: */*",
        ]
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        if body or method == "POST":
            lines.append("Content-Length: %d" % len(body))
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")
        idle = self.idle.get(key) or []
        conn = idle.pop() if idle else None
        reused = conn is not None
        if conn is None:
            conn = await self._connect(key)
        try:
            try:
                conn.writer.write(raw)
                await conn.writer.drain()
                status_line = await conn.reader.readline()
            except (OSError, ConnectionError):
                status_line = b""
            if not status_line:
                self._drop(conn)
                if reused:  # a stale keep-alive connection: retry once on a new one
                    return await self.request(method, url, headers, body, on_data)
                raise BenchHttpError("disconnected", host, port)
            try:
                version, status, reason = self._status(status_line)
                resp_headers = await self._headers(conn.reader)
            except (ValueError, OSError, ConnectionError):
                self._drop(conn)
                raise BenchHttpError("disconnected", host, port) from None
            stream = on_data if status == 200 else None
            pieces = []
            sink = stream or pieces.append
            try:
                complete = await self._body(conn.reader, resp_headers, sink)
            except (ValueError, OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                self._drop(conn)
                raise BenchHttpError("payload", host, port) from None
            keep = complete and version == "HTTP/1.1" and "close" not in resp_headers.get("connection", "").lower()
            if keep:
                self.idle.setdefault(key, []).append(conn)
            else:
                self._drop(conn)
            return status, reason, b"".join(pieces)
        except BaseException:
            if conn in self.open and conn not in (self.idle.get(key) or []):
                self._drop(conn)
            raise

    @staticmethod
    def _status(line):
        text = line.decode("latin-1").rstrip("\r\n")
        parts = text.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(text)
        return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""

    @staticmethod
    async def _headers(reader):
        headers = {}
        while True:
            line = await reader.readline()
            if not line:
                raise ValueError("eof in headers")
            if line in (b"\r\n", b"\n"):
                return headers
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()

    @staticmethod
    async def _body(reader, headers, sink):
        """Read the body into sink(); True if it ended cleanly (so the connection can be reused)."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await reader.readline()
                if not size_line:
                    raise ValueError("eof in chunked body")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = await reader.readline()
                        if not trailer:
                            raise ValueError("eof in trailer")
                        if trailer in (b"\r\n", b"\n"):
                            return True
                data = await reader.readexactly(size)
                await reader.readexactly(2)
                sink(data)
        length = headers.get("content-length")
        if length is not None:
            n = int(length)
            if n:
                sink(await reader.readexactly(n))
            return True
        while True:
            data = await reader.read(65536)
            if not data:
                return False
            sink(data)
