"""Fixtures of the service tests: a running app with two users (ada, bob) over in-process sources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.memory_store.conftest import database  # noqa: F401 - the SQLite/PostgreSQL parametrized fixture
from tests.service.support import ServiceHarness, running_service, service_settings


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with running_service(service_settings(tmp_path)) as harness:
        yield harness


@pytest.fixture
async def client(service: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with service.client() as http:
        yield http
