"""How a command reaches a node: the Transport protocol, SSH and local implementations."""

from console.transport.base import CommandResult, PortForward, Transport, TransportError

__all__ = ["CommandResult", "PortForward", "Transport", "TransportError"]
