"""Start the agents of the simulated nodes on this machine before the console loads its UI.

An agent needs ~40 ms of CPU before its first sample, and the demo has four. Started
here, right after the profile is read, they come up while the console imports Textual
and draws its first frame; the fleet then adopts each running process
(LocalTransport.stream_lines) instead of starting it, so every node is live soon after
the first frame rather than ~150 ms later (tests/perf/startup.py budgets both).

They run at the lowest priority (nice 19) in the console's own session, so they take
only the CPU the console leaves: started at normal priority they would slow the
console's own start by as much as they save. Real nodes, local ones included, are
started by the fleet as before: a real agent is never left at a lowered priority.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.core.model import Profile
from console.services.agent_bundle import install_local_agent, telemetry_argv
from console.transport.base import TransportError
from console.transport.local import discard_early, start_early

if TYPE_CHECKING:
    from console.core.health_profile import HealthSettings

__all__ = ["discard_early", "start_local_agents"]

EARLY_NICE = 19


def start_local_agents(profile: Profile, interval: float, health: HealthSettings | None = None) -> list[str]:
    """Start the telemetry agent of every simulated local node; returns their names.

    `health`: the profile's health settings when the caller read them already (cli/tui.py:
    the profile's files are not read and parsed a second time before the first frame).
    Best effort: a node whose agent cannot be installed or started here is left to the
    fleet, which starts it (or reports why not) as for any other node."""
    started = []
    health_interval = _health_interval(profile, health)
    for node in profile.nodes:
        if node.transport != "local" or node.simulate is None:
            continue
        if node.telemetry == "prometheus" and profile.prometheus is not None:
            continue
        try:
            command = install_local_agent(node)
        except (OSError, ValueError, TransportError):
            continue
        if start_early(telemetry_argv(command, interval, health_interval), command.env_dict(), nice=EARLY_NICE):
            started.append(node.name)
    return started


def _health_interval(profile: Profile, health: HealthSettings | None) -> float | None:
    """The --health-interval the fleet will ask for (the early process is adopted by its argv)."""
    from console.core.errors import ProfileError
    from console.core.health_profile import health_settings
    from console.services.fleet import agent_reads_health

    if not agent_reads_health():
        return None
    try:
        return (health or health_settings(profile)).rules.interval
    except (ProfileError, OSError):
        return None
