"""Fixtures of the services tests."""

from __future__ import annotations

import pytest

from console.services.instances import InstanceService
from console.services.transports import TransportPool


@pytest.fixture
async def service(monkeypatch):
    """An InstanceService on its own pool, with the simulated vLLM sped up; `started` lists the
    (node, name) of instances to stop afterwards, so no test leaves a server behind."""
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    pool = TransportPool()
    svc = InstanceService(pool)
    started: list = []
    yield svc, started
    for node, name in started:
        try:
            await svc.stop(node, name, int_timeout=5, term_timeout=2)
        except Exception:
            pass
    await pool.close()
