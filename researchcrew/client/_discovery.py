"""Whether a command uses a running service or opens the stores itself, and why.

A `researchcrew serve` of the data folder listens on ``<data folder>/service.sock``. A command that needs the stores
uses it when it answers *and* says it owns the same data folder; otherwise the command runs in its own process, as
it always did:

* ``--local`` (or ``RESEARCHCREW_LOCAL=1``): in process, as asked;
* no socket file: no service runs for this data folder;
* a socket file nobody answers on (a service that was killed): stale, in process;
* a service that answers for another data folder (a socket copied or linked across folders), or with an error:
  in process, saying which.

`researchcrew status` prints the same ``Route`` (mode and reason) that each command acts on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from researchcrew.client._transport import UNIX_SCHEME, ServiceClient
from researchcrew.errors import ServiceError

Mode = Literal["service", "local"]
IDENTITY_TIMEOUT_S = 60.0
LOCAL_ENVVAR = "RESEARCHCREW_LOCAL"  # the CLI's --local, as an environment variable (click's envvar=)


@dataclass(frozen=True)
class Route:
    """Where a command runs: ``service`` (through ``url``) or ``local`` (in process), and why."""

    mode: Mode
    reason: str
    url: str | None = None


def find_service(data_dir: Path, socket_path: Path, *, local: bool = False, user_id: str | None = None) -> Route:
    """The route of a command of ``data_dir`` (see the module docstring)."""
    if local:
        return Route("local", f"in process, as asked (--local or {LOCAL_ENVVAR})")
    if not socket_path.exists():
        return Route("local", f"no service is running for {data_dir} (no socket at {socket_path})")
    if not socket_path.is_socket():
        return Route("local", f"{socket_path} is not a socket; no service is running for {data_dir}")
    return asyncio.run(_probe(data_dir, data_dir.resolve(), socket_path, socket_path.absolute(), user_id))


async def _probe(data_dir: Path, resolved: Path, socket_path: Path, absolute: Path, user_id: str | None) -> Route:
    url = UNIX_SCHEME + str(absolute)
    async with ServiceClient(url, user_id=user_id) as client:
        try:
            # A stale socket refuses the connection at once; a service that accepted it but is busy (questions,
            # a job run, a loaded machine) is waited for: it owns the stores, in process would find them held.
            found = await client.identity(timeout_s=IDENTITY_TIMEOUT_S)
        except ServiceError as error:
            if error.status is None:
                return Route("local", f"stale socket {socket_path}: no service answers on it ({error})")
            return Route("local", f"the service at {socket_path} answered HTTP {error.status}: {error.detail}")
    served = str(found.get("data_dir", ""))
    if Path(served) != resolved:
        return Route("local", f"the service at {socket_path} serves {served or 'an unknown folder'}, not {data_dir}")
    return Route("service", f"the service (pid {found.get('pid')}) for {data_dir} answers at {socket_path}", url)
