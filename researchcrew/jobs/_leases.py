"""Who holds a question's lease, and whether that holder is provably dead.

A lease records its holder: the host (its name and, where Linux says, its pid namespace — pids are only comparable
inside one), the pid, the boot id (``/proc/sys/kernel/random/boot_id``) and a random token drawn once per process.
Another process on the same host can then tell that a holder is gone without waiting for the lease to run out:

* the machine has rebooted since (another boot id);
* the pid is this process's own, under another token (the holder was an earlier process with this pid);
* no process has that pid any more.

Anything else — another host, a live pid — is not proof: such a lease is left to run out (``jobs.lease_s``).
Whatever is decided here, a result is only ever stored under the lease that is current (``JobStore.finish_item``
is fenced on the claim's token), so a holder wrongly taken for dead costs repeated work, never a second result.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_PID_NAMESPACE = Path("/proc/self/ns/pid")


@dataclass(frozen=True)
class LeaseHolder:
    """One process, as its leases name it."""

    host: str
    pid: int
    boot: str | None
    process: str  # random, drawn once per process

    @property
    def name(self) -> str:
        """``hostname:pid``: how results say which process stored them."""
        return f"{self.host.split('|', 1)[0]}:{self.pid}"

    def outlived(self, pid: int | None, boot: str | None, process: str | None) -> bool:
        """Whether the holder (``pid``, ``boot``, ``process``) of a lease on this host is provably dead."""
        if pid is None or process is None or process == self.process:
            return False
        if boot is not None and self.boot is not None and boot != self.boot:
            return True  # the machine rebooted since
        if pid == self.pid:
            return True  # our own pid, another token: the holder was an earlier process with this pid
        return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except OSError:
        return True  # cannot tell: not proof of death
    return True


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _host() -> str:
    host = socket.gethostname()
    try:
        namespace = os.readlink(_PID_NAMESPACE)  # e.g. "pid:[4026531836]"
    except OSError:
        return host[:200]
    return f"{host[:200]}|{namespace[:50]}"


_current: LeaseHolder | None = None


def this_process() -> LeaseHolder:
    """This process's identity (drawn again after a fork: a child is another holder)."""
    global _current  # one identity per process, by definition
    if _current is None or _current.pid != os.getpid():
        _current = LeaseHolder(host=_host(), pid=os.getpid(), boot=_read(_BOOT_ID), process=secrets.token_hex(16))
    return _current
