"""Reading an HTTP answer's body without trusting its size: the body streams in and reading
stops as soon as it passes its cap, so an oversized answer is never held whole (W §2).
Shared by the Prometheus client and the live /metrics poller."""

from __future__ import annotations

from typing import Any


class BodyTooLarge(Exception):
    """The answer (or, with a shared budget, the answers together) went over the cap."""

    def __init__(self, *, together: bool) -> None:
        super().__init__("together" if together else "answer")
        self.together = together


async def read_capped(reply: Any, limit: int, budget: list[int] | None = None) -> bytes:
    """The body of a streamed httpx reply, at most `limit` bytes; `budget` (one mutable
    count) is shared by several answers and debited as they arrive. A declared
    Content-Length over the limit is refused before reading; the count is of decoded
    bytes, so a small compressed bomb stops here too."""
    declared = reply.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(together=False)
    body = bytearray()
    async for chunk in reply.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(together=False)
        if budget is not None:
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise BodyTooLarge(together=True)
    return bytes(body)
