"""A console command's tether: what ties the instances it owns to its own life on the node.

A long-lived command that starts an instance of its own (`baseline save` / `check`: the suite's
instance and its offline runs) puts ``tether.env`` into that instance's environment. It holds
the command's lifeline (console/agent/lifeline.py); the node's supervisor watches it and ends the
instance within seconds once it is gone, however the command ended: SIGKILL included (W2: a
killed check left its instance holding the GPUs until the next check).

* A local node: the lifeline is this process itself (services/demo.py lifeline_token()).
* Any other node (SSH): a pid of this machine means nothing there. The node runs
  ``node_agent.py tether`` over this command's connection (agent/tether.py): it prints its own
  lifeline and reads its stdin until EOF. When this process dies its TCP connection closes,
  sshd closes the channel, the tether reads EOF and ends, and the supervisor ends the instance.

A tether that ends while the command still runs (the link dropped) ends the instance as well:
``tether.lost`` then says so, and the command reports that rather than a failed repeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

from console.core.model import NodeSpec
from console.services.agent_bundle import install_agent
from console.services.demo import ENV, lifeline_token
from console.services.transports import TransportPool
from console.transport.base import StreamControl, TransportError

__all__ = ["START_TIMEOUT", "Tether", "tethered"]

START_TIMEOUT = 30.0  # seconds for the node's tether to say its lifeline
END_WAIT = 5.0  # seconds for it to end after our "end" line before its channel is closed


class Tether:
    """A live tie to a node (not a record: ``lost`` is set when the node's end goes away)."""

    def __init__(self, node: str, env: Mapping[str, str]) -> None:
        self.node = node
        self.env: Mapping[str, str] = dict(env)
        self.lost: str | None = None

    def __repr__(self) -> str:
        return f"Tether({self.node!r}, {dict(self.env)!r}, lost={self.lost!r})"


def _lifeline_of(line: str) -> str | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("kind") != "tether":
        return None
    value = message.get("lifeline")
    return value if isinstance(value, str) and value.partition(":")[0].isdigit() else None


async def _first_lifeline(lines: AsyncGenerator[str, None]) -> str | None:
    async for line in lines:
        token = _lifeline_of(line)
        if token is not None:
            return token
    return None


@contextlib.asynccontextmanager
async def tethered(pool: TransportPool, node: NodeSpec) -> AsyncIterator[Tether]:
    """The tether of this command on ``node`` for the block's duration; give ``tether.env`` to
    every instance (or run) the command owns there. Raises TransportError when the node cannot
    hold one (its reason does not name the node: the caller does); nothing is started then, so
    nothing can be left behind."""
    if node.transport == "local":
        yield Tether(node.name, {ENV: lifeline_token()})
        return
    transport = pool.get(node)
    if not getattr(transport, "accepts_control", False):
        raise TransportError("this connection keeps no stdin open for a tether", "command")
    command = await install_agent(transport, node)
    control = StreamControl()  # the channel's stdin stays open: its EOF is the tether's end
    lines = transport.stream_lines(command.argv("tether"), env=command.env_dict(), control=control)
    watcher: asyncio.Task[None] | None = None
    try:
        try:
            token = await asyncio.wait_for(_first_lifeline(lines), START_TIMEOUT)
        except asyncio.TimeoutError:
            raise TransportError(f"the node's tether said nothing within {START_TIMEOUT:g} s", "timeout") from None
        if token is None:
            raise TransportError("the node's tether ended before it started", "command")
        tie = Tether(node.name, {ENV: token})
        ending = asyncio.Event()
        watcher = asyncio.create_task(_watch(lines, tie, ending))
        try:
            yield tie
        finally:
            ending.set()
            control.send("end")
            try:
                await asyncio.wait_for(asyncio.shield(watcher), END_WAIT)
            except asyncio.TimeoutError:
                pass
    finally:
        if watcher is not None and not watcher.done():
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await lines.aclose()  # stops the node's process if it still runs


async def _watch(lines: AsyncGenerator[str, None], tie: Tether, ending: asyncio.Event) -> None:
    """Read the tether's stream to its end: an end we did not ask for is a lost tie."""
    why = "the node's tether ended"
    try:
        async for _ in lines:
            pass
    except TransportError as exc:
        why = exc.reason
    if not ending.is_set():
        tie.lost = f"{tie.node}: the link to the node was lost ({why}): the node stopped what this command started"
