"""The service's Unix socket in the data folder: how the `researchcrew` commands of this machine find it.

``researchcrew serve`` (one process) listens on its TCP port *and* on ``<data folder>/service.sock``, one app on
both (uvicorn serves the list of sockets it is given). The socket file is created with mode 0600, so only the
service's owner (and root) can connect: the file's permissions are the authentication, as for docker's or ollama's
local daemon socket. A request that came over it runs as the user its ``X-Researchcrew-User`` header names (the
CLI's ``--user``), without an API key, and is not rate-limited (it is the machine's owner running commands).

Whether a request came over the socket is read from the ASGI scope uvicorn builds: a Unix socket's ``server`` is
``(path, None)``; a TCP connection always has a port, so no client over the network can look local.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from pathlib import Path
from typing import Any

from researchcrew.errors import ConfigurationError

logger = logging.getLogger(__name__)

LOCAL_USER_HEADER = "x-researchcrew-user"
SOCKET_MODE = 0o600
_MAX_PATH_BYTES = 107  # sun_path is 108 bytes with its terminating NUL on Linux
_BACKLOG = 2048


def bind_local_socket(path: Path) -> socket.socket | None:
    """A listening Unix socket at ``path`` (mode 0600 from the moment it exists), or None when the path is too long
    for a Unix socket (the service then listens on TCP only; commands run in their own process). A stale socket file
    (nobody answers) is replaced; one that answers means another service owns this data folder: refused."""
    name = str(path)
    if len(os.fsencode(name)) > _MAX_PATH_BYTES:
        logger.warning("no local socket: %s is longer than a Unix socket path may be; commands run in process", name)
        return None
    if path.exists() or path.is_symlink():
        if _answers(name):
            raise ConfigurationError(
                f"another `researchcrew serve` already listens on {name} for this data folder; stop it first, or "
                "give this one another RESEARCHCREW_DATA_DIR"
            )
        path.unlink()  # stale: left by a service that was killed
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # no moment at which the file is connectable by others
    try:
        sock.bind(name)
        os.chmod(name, SOCKET_MODE)
        sock.listen(_BACKLOG)
    except OSError as error:
        sock.close()
        raise ConfigurationError(f"cannot listen on {name}: {error.strerror or error}") from error
    finally:
        os.umask(previous)
    sock.set_inheritable(True)
    return sock


def remove_local_socket(sock: socket.socket | None, path: Path) -> None:
    """Close the socket and delete its file."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        if path.is_socket():
            path.unlink()


def came_over_local_socket(scope: dict[str, Any] | Any, socket_path: Path) -> bool:
    """Whether an ASGI request arrived through this service's Unix socket (see the module docstring)."""
    server = scope.get("server") if hasattr(scope, "get") else None
    return (
        isinstance(server, tuple | list)
        and len(server) == 2
        and server[1] is None
        and str(server[0]) == str(socket_path)
    )


def _answers(name: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(name)
    except OSError:
        return False
    finally:
        probe.close()
    return True
