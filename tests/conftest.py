"""Test-wide guards and fixtures.

* No test reaches the internet: connecting a socket to anything but loopback (or a Unix socket) fails loudly.
* Each test gets its own data directory and no credentials from the developer's environment.
* A hung test fails after its time budget (pytest-timeout, configured in pyproject.toml): 300 s by default, more for
  tests marked ``slow``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from researchcrew.knowledge._store import _poll_lite_quickly
from tests.helpers.services import MEMORY_CONNECT_TIMEOUT, fresh_postgres_database, required_directory

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
# crewAI execution tracing (and its first-run trace collection) is separate from telemetry; off in tests.
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# gRPC's C core (pymilvus ↔ Milvus Lite) logs keepalive "too_many_pings" notices to stderr at interpreter exit,
# after pytest's summary; they are harmless and would bury the summary line. Must be set before grpc is imported.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = PROJECT_ROOT.parent / "shared"

SLOW_TEST_TIMEOUT_S = 600  # the budget of a test marked `slow` (subprocesses, model loading), unless it sets its own

# Variables from the developer's machine that would change what a test does.
_ISOLATED_VARIABLES = ("FIRECRAWL_API_KEY", "FIRECRAWL_API_URL", "ZEP_API_KEY", "ZEP_API_URL", "OPENAI_API_KEY")


class InternetAccessError(RuntimeError):
    """A test tried to connect somewhere other than this machine."""


def _is_local(address: Any) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _is_local(address):
        raise InternetAccessError(f"tests must not reach the internet (tried to connect to {address!r})")
    _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _is_local(address):
        raise InternetAccessError(f"tests must not reach the internet (tried to connect to {address!r})")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]

# pymilvus sleeps half a second before it first asks whether an index is built (and between flush and load checks);
# Milvus Lite is done in milliseconds. The store makes it ask every 20 ms when it opens a Lite file; the test process
# does so from the start, for the tests that talk to Milvus Lite through pymilvus directly.
_poll_lite_quickly()


# Under CI every property test draws the same examples on every run (derandomized, no example database): a red CI
# is then a change's doing, never the luck of the draw. Locally the default profile keeps exploring new examples.
# No per-example deadline in either profile: 200 ms is a wall-clock assert, and on a loaded 2-core machine a first
# example that loads a stemmer or a model takes longer (a red run no change caused).
hypothesis.settings.register_profile("local", deadline=None)
hypothesis.settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
hypothesis.settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "local")


# hypothesis warns when the global `random` state changes while it draws an example. The schema fuzz draws in the
# main thread while its live server, in another thread of the same process, may be using the global `random` itself
# (tenacity's retry jitter in a background run started by an earlier request, under load still running): a false
# alarm, which `filterwarnings = error` made a red CI. Our own strategies draw nothing from `random`.
_FUZZ_WITH_A_LIVE_SERVER = "test_schema_fuzz"  # tests/service/test_schema_fuzz.py
_RANDOM_IN_ANOTHER_THREAD = (
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` get ``SLOW_TEST_TIMEOUT_S`` instead of the default budget, unless they set their own;
    the schema fuzz tolerates the global ``random`` moving under its live server's threads (see above)."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))
        if item.path.name.startswith(_FUZZ_WITH_A_LIVE_SERVER):
            item.add_marker(pytest.mark.filterwarnings(_RANDOM_IN_ANOTHER_THREAD))


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("RESEARCHCREW_"):
            monkeypatch.delenv(name)
    for name in _ISOLATED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RESEARCHCREW_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    for name, value in MEMORY_CONNECT_TIMEOUT.items():
        monkeypatch.setenv(name, value)
    yield


@pytest.fixture
def shared_dir() -> Path:
    """../shared next to the project; where it is missing, tests that need it skip with a reason (fail under CI=true,
    where it must be present: a silently skipped test there would be a green lie)."""
    return required_directory(SHARED_DIR, "shared data (it sits beside the project in dev and CI)")


@pytest.fixture
def fixtures_dir(shared_dir: Path) -> Path:
    return shared_dir / "fixtures"


# ---- memory databases at the head revision, migrated once per session (tests/memory_store/conftest.py copies them)


async def _migrate(url: str) -> None:
    from researchcrew.memory.store import MemoryStore

    store = await MemoryStore.open(url)
    await store.close()


@pytest.fixture(scope="session")
def migrated_sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite memory database at the head revision; tests get copies of the file."""
    path = tmp_path_factory.mktemp("migrated") / "memory.db"
    asyncio.run(_migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def migrated_postgres_template() -> Iterator[str]:
    """The name of a PostgreSQL database at the head revision; tests get copies (CREATE DATABASE ... TEMPLATE).
    Its store is closed after migrating: PostgreSQL copies only a database nobody is connected to."""
    with fresh_postgres_database(f"rc_memtemplate_{uuid.uuid4().hex[:8]}") as url:
        asyncio.run(_migrate(url))
        yield url.rsplit("/", 1)[1]
