"""The reconnect policy of SshTransport, without a network."""

from __future__ import annotations

import pytest

from console.core.model import NodeSpec
from console.transport.base import TransportError
from console.transport.ssh import SshTransport, parse_jump, retry_schedule


def test_retry_schedule_doubles_from_half_a_second_and_caps_at_30():
    assert retry_schedule(0) == []
    assert retry_schedule(8) == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert retry_schedule(3, base=1, cap=3) == [1, 2, 3]
    assert retry_schedule(10_000)[-1] == 30  # no float overflow for long outages
    with pytest.raises(ValueError):
        retry_schedule(-1)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("bastion", (None, "bastion", None)),
        ("ops@bastion", ("ops", "bastion", None)),
        ("ops@bastion:2200", ("ops", "bastion", 2200)),
        ("10.0.0.1:22", (None, "10.0.0.1", 22)),
        ("me@[fd00::1]:2222", ("me", "fd00::1", 2222)),
        ("fd00::1", (None, "fd00::1", None)),
    ],
)
def test_parse_jump(spec, expected):
    assert parse_jump(spec) == expected


@pytest.mark.parametrize("spec", ["", "host:notaport", "host:0", "[fd00::1", "u@:22"])
def test_parse_jump_rejects(spec):
    with pytest.raises(ValueError):
        parse_jump(spec)


class FakeOpen:
    """Stands in for SshTransport._open: fails with the given kinds, then succeeds."""

    def __init__(self, transport: SshTransport, kinds: list[str]) -> None:
        self.transport = transport
        self.kinds = list(kinds)
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.kinds:
            raise TransportError(f"n: fail {self.calls}", kind=self.kinds.pop(0))


def make(kinds: list[str]) -> tuple[SshTransport, FakeOpen, list[float]]:
    t = SshTransport(NodeSpec(name="n", host="192.0.2.1"))
    fake = FakeOpen(t, kinds)
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    t._open = fake  # type: ignore[method-assign]
    t._sleep = sleep  # type: ignore[assignment]
    return t, fake, slept


@pytest.mark.asyncio
async def test_connect_retries_with_backoff_then_succeeds():
    t, fake, slept = make(["unreachable", "timeout", "closed"])
    await t.connect(retries=5)
    assert fake.calls == 4
    assert slept == [0.5, 1, 2]


@pytest.mark.asyncio
async def test_connect_gives_up_after_retries():
    t, fake, slept = make(["unreachable"] * 10)
    with pytest.raises(TransportError) as info:
        await t.connect(retries=3)
    assert info.value.kind == "unreachable"
    assert fake.calls == 4 and slept == [0.5, 1, 2]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["auth", "host_key"])
async def test_connect_does_not_retry_what_waiting_cannot_fix(kind):
    t, fake, slept = make([kind, kind])
    with pytest.raises(TransportError) as info:
        await t.connect(retries=5)
    assert info.value.kind == kind
    assert fake.calls == 1 and slept == []


@pytest.mark.asyncio
async def test_default_connect_tries_once():
    t, fake, slept = make(["unreachable"])
    with pytest.raises(TransportError):
        await t.connect()
    assert fake.calls == 1 and slept == []
