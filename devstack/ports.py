"""Ports on 127.0.0.1 checked before a local server starts (`entitlements local up`, `entitlements serve`):
a taken port is refused at once, naming the port and the option that picks another, instead of a server
that waits forever (moto's) or logs a traceback (uvicorn's). Light on purpose: no server is imported."""

from __future__ import annotations

__all__ = ["LOOPBACK", "PortInUseError", "ensure_free_ports"]

import socket

from schema.errors import TerminalError

LOOPBACK = "127.0.0.1"


class PortInUseError(TerminalError):
    """A port the local stack was told to listen on is taken (or given twice). Names the port and the
    option that picks another."""


def ensure_free_ports(ports: dict[str, int], *, host: str = LOOPBACK) -> None:
    """Refuse, before anything starts, a fixed port on `host` that something already listens on, or one
    given to two parts. `ports`: the option (or variable) that sets a port -> the port (0: a free one,
    never checked)."""
    claimed: dict[int, str] = {}
    for option, port in ports.items():
        if port == 0:
            continue
        if port in claimed:
            raise PortInUseError(f"port {port} is given to both {claimed[port]} and {option}: choose another")
        claimed[port] = option
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # As the servers bind (SO_REUSEADDR): a port with only closing connections is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                in_use = True
            else:
                in_use = False
        if in_use:
            raise PortInUseError(
                f"port {port} on {host} is in use: stop what holds it, or choose another with {option} "
                "(0 picks a free one)"
            )
