"""HTTP/1.1 for the simulated server: requests read from asyncio streams, responses like uvicorn's."""

import asyncio
import email.utils
import json

from .constants import REASONS, MiB

MAX_BODY = 64 * MiB
JSON_TYPE = "application/json"


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class HttpServer:
    """One connection at a time per task; `dispatch` (a subclass's) answers each request."""

    def __init__(self, sim):
        self.sim = sim
        self.connections = set()

    # -- plumbing

    async def handle(self, reader, writer):
        peer = writer.get_extra_info("peername")
        client = "%s:%s" % (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else "-"
        self.connections.add(writer)
        try:
            while True:
                try:
                    head = await self._read_head(reader)
                except (ValueError, UnicodeError, asyncio.LimitOverrunError):
                    await self._send(
                        writer,
                        (client, "-", "-", "1.1"),
                        400,
                        b"Invalid HTTP request received.",
                        "text/plain; charset=utf-8",
                        False,
                        log=False,
                    )
                    break
                if head is None:
                    break
                method, target, version, headers = head
                ctx = (client, method, target, version)
                keep = self._keep_alive(version, headers)
                try:
                    body = await self._read_body(reader, writer, headers, version)
                except (ValueError, asyncio.LimitOverrunError):
                    await self._send(writer, ctx, 400, {"detail": "Invalid request body"}, JSON_TYPE, False)
                    break
                if not await self.dispatch(writer, ctx, headers, body, keep):
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(writer)
            try:
                writer.close()
            except Exception:
                pass

    @staticmethod
    async def _read_head(reader):
        line = await reader.readline()
        if not line:
            return None
        if not line.endswith(b"\n"):
            raise ValueError("truncated request line")
        parts = line.decode("latin-1").strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ValueError("bad request line")
        headers = {}
        size = 0
        while True:
            h = await reader.readline()
            size += len(h)
            if size > 65536:
                raise ValueError("headers too large")
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise ValueError("truncated headers")
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep:
                raise ValueError("bad header")
            headers[name.strip().lower()] = value.strip()
        return parts[0].upper(), parts[1], parts[2][5:], headers

    @staticmethod
    async def _read_body(reader, writer, headers, version):
        if headers.get("expect", "").lower() == "100-continue" and version == "1.1":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts, total = [], 0
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length = int(headers.get("content-length") or 0)
        if length < 0 or length > MAX_BODY:
            raise ValueError("bad content-length")
        return await reader.readexactly(length) if length else b""

    @staticmethod
    def _keep_alive(version, headers):
        conn = headers.get("connection", "").lower()
        if version == "1.0":
            return "keep-alive" in conn
        return "close" not in conn

    async def _send(self, writer, ctx, status, body, ctype=JSON_TYPE, keep=True, log=True, extra=()):
        if isinstance(body, (dict, list)):
            body = dumps(body)
        lines = [
            "HTTP/1.1 %d %s" % (status, REASONS.get(status, "")),
            "date: " + email.utils.formatdate(usegmt=True),
            "server: uvicorn",
            "content-length: %d" % len(body),
        ]
        if ctype:
            lines.append("content-type: " + ctype)
        lines.extend(extra)
        if not keep:
            lines.append("connection: close")
        if log:  # uvicorn logs when the response starts
            self._access(ctx, status)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        return keep

    def _access(self, ctx, status):
        if not self.sim.args.disable_uvicorn_access_log:
            self.sim.log.access(ctx[0], ctx[1], ctx[2], ctx[3], status)

    async def dispatch(self, writer, ctx, headers, body, keep):  # pragma: no cover - abstract
        raise NotImplementedError
