"""devstack/ports.py: a taken port is refused before a server starts, naming the port and its option."""

from __future__ import annotations

import socket

import pytest

from devstack.ports import PortInUseError, ensure_free_ports


def test_a_taken_port_is_refused_before_anything_starts_naming_the_port_and_its_option() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError) as refused:
            ensure_free_ports({"--array-port": port})
    assert str(refused.value) == (
        f"port {port} on 127.0.0.1 is in use: stop what holds it, or choose another with --array-port "
        "(0 picks a free one)"
    )


def test_one_port_given_to_two_parts_is_refused() -> None:
    with pytest.raises(PortInUseError, match="given to both --port and --array-port"):
        ensure_free_ports({"--port": 47811, "--array-port": 47811})


def test_port_zero_is_never_checked() -> None:
    ensure_free_ports({"--port": 0, "--array-port": 0})
