"""Who holds a Milvus Lite knowledge base: one process per file, and the others are told which one.

Milvus Lite (milvus-lite >= 3) runs its server inside the process that opens a ``.db`` path and takes an advisory
``flock`` on ``<path>/LOCK`` for as long as it is open. A second process cannot open it: milvus-lite logs a
traceback and pymilvus raises "Open local milvus failed". Before connecting, ``lite_lock_holder`` asks the kernel
who holds that lock (``/proc/locks`` on Linux; elsewhere a non-blocking probe of the lock, without a pid), so the
store can refuse in one line that names the process and says what to do (``locked_message``).

The lock held by *this* process (another ``KnowledgeBase`` on the same file: milvus-lite shares one server per path
within a process) is not a conflict.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_FILENAME = "LOCK"  # milvus_lite.db.LOCK_FILENAME
_PROC_LOCKS = Path("/proc/locks")
_COMMAND_CHARS = 120


@dataclass(frozen=True)
class LockHolder:
    """The process holding a knowledge base's lock (``pid`` None when the platform cannot say)."""

    pid: int | None
    command: str | None = None

    @property
    def is_server(self) -> bool:
        """Whether it looks like a running ``researchcrew serve``."""
        words = (self.command or "").split()
        return "serve" in words and any(word.endswith("researchcrew") for word in words)

    def describe(self) -> str:
        if self.pid is None:
            return "another process"
        return f"process {self.pid}" + (f" ({self.command})" if self.command else "")


def lite_lock_holder(data_dir: Path) -> LockHolder | None:
    """The other process that holds Milvus Lite's lock on ``data_dir``, or None when the lock is free (or does not
    exist yet, or is held by this process)."""
    lock_path = data_dir / LOCK_FILENAME
    try:
        status = lock_path.stat()
    except OSError:
        return None  # never opened: nobody holds it
    if _PROC_LOCKS.exists():
        pid = _pid_from_proc_locks(status.st_dev, status.st_ino)
        if pid is None or pid == os.getpid():
            return None
        return LockHolder(pid, _command_line(pid))
    if _served_here(data_dir):
        return None
    return LockHolder(None) if _locked_by_probe(lock_path) else None


def locked_message(display_path: str, holder: LockHolder) -> str:
    """One line: which process holds the knowledge base, and what to do."""
    who = holder.describe()
    if holder.is_server:
        return (
            f"the knowledge base {display_path} is held by a running `researchcrew serve` ({who}); Milvus Lite lets "
            "one process open it at a time: stop the server before running this command here, or give both a Milvus "
            "server (RESEARCHCREW_MILVUS__URI=http://host:19530)"
        )
    return (
        f"the knowledge base {display_path} is in use by {who}; Milvus Lite lets one process open it at a time: wait "
        "for that process to finish, or share one Milvus server between processes "
        "(RESEARCHCREW_MILVUS__URI=http://host:19530)"
    )


def _pid_from_proc_locks(device: int, inode: int) -> int | None:
    """The pid of the FLOCK entry in /proc/locks for this file (``<pid> <major>:<minor>:<inode>`` per line)."""
    wanted = (os.major(device), os.minor(device), inode)
    try:
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError as error:
        logger.debug("cannot read %s: %s", _PROC_LOCKS, error)
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4157 fe:00:2179668 0 EOF" ("->" marks a waiter, which holds nothing)
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        try:
            major, minor, node = fields[5].split(":")
            identity = (int(major, 16), int(minor, 16), int(node))
            pid = int(fields[4])
        except ValueError:
            continue
        if identity == wanted:
            return pid
    return None


def _command_line(pid: int) -> str | None:
    """The holder's command line, shortened (interpreter dropped, the script's directory left out)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    if words and Path(words[0]).name.startswith("python"):
        words = words[1:]
    if words and words[0] == "-m" and len(words) > 1:
        words = words[1:]
    if words:
        words[0] = Path(words[0]).name
    command = " ".join(" ".join(words).split())  # one line, whatever the arguments hold
    return command[: _COMMAND_CHARS - 1] + "…" if len(command) > _COMMAND_CHARS else command or None


def _served_here(data_dir: Path) -> bool:
    """Whether milvus-lite already serves this path inside this process (then its lock is ours)."""
    try:
        from milvus_lite.server_manager import server_manager_instance
    except ImportError:
        return False
    servers = getattr(server_manager_instance, "_servers", {})
    return os.path.abspath(data_dir) in servers


def _locked_by_probe(lock_path: Path) -> bool:
    """Without /proc/locks: try the lock without waiting (and release it at once)."""
    if sys.platform == "win32":
        return False  # milvus-lite's Windows locking is not probed; connecting reports it instead
    import fcntl

    try:
        descriptor = os.open(lock_path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)


__all__ = ["LockHolder", "lite_lock_holder", "locked_message"]
