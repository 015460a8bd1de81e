"""Free ports: a daemon under test listens where nothing else does."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released): free to listen on, or, left
    alone, a port whose connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
