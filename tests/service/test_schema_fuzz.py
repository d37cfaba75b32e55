"""Fuzz the service's OpenAPI schema with schemathesis: a bounded number of generated requests per operation
(valid ones, then invalid ones) against a real uvicorn; no 5xx, and every response (status code, content type,
headers, body) matches the schema.

The operations come from the app's own schema; each is a test of its own, driven by hypothesis through
schemathesis' strategies (schemathesis' pytest plugin does not run on this pytest release).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service.accounts import Accounts
from researchcrew.service.app import create_app
from researchcrew.settings import Settings
from tests.service.support import LiveServer, default_tools, live_server, service_settings

MAX_EXAMPLES = 20  # per operation and generation mode: the whole fuzz stays within about a minute
# Bodies whose validity JSON Schema cannot state (a cron expression, the lines of a question file, options checked
# against each other): a schema-valid request may still get its 422 naming the problem. Every other check runs.
SEMANTIC_BODIES = {"POST /v1/jobs", "POST /v1/jobs/upload", "POST /kickoff"}

_SCHEMA = schemathesis.openapi.from_dict(create_app(Settings(data_dir=Path(tempfile.gettempdir()))).openapi())
OPERATIONS = [result.ok() for result in _SCHEMA.get_all_operations()]
# Invalid requests exist only for operations that take something (a path, a query, a body).
CASES = [
    pytest.param(operation, mode, id=f"{operation.label}-{mode.value}")
    for operation in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or len(operation.path_parameters) + len(operation.query) + len(operation.body)
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    settings = service_settings(
        tmp_path_factory.mktemp("fuzz"), rate_limit="100000/minute", max_concurrent_questions=100
    )
    runtime = open_runtime(settings, tools=default_tools())
    with live_server(create_app(settings, runtime=runtime)) as server:
        key = server.run_in_loop(_issue_key(runtime))
        yield server, {"Authorization": f"Bearer {key}"}
    asyncio.run(runtime.aclose())


async def _issue_key(runtime: Runtime) -> str:
    return (await Accounts(await runtime.memory_store()).add_user("fuzzer")).key


def test_the_schema_lists_every_route() -> None:
    labels = {operation.label for operation in OPERATIONS}
    assert {"GET /healthz", "GET /readyz", "POST /v1/sessions", "POST /v1/sessions/{session_id}/messages"} <= labels
    assert {"POST /v1/jobs", "POST /v1/jobs/{job}/runs", "GET /v1/runs/{run_id}/results", "POST /kickoff"} <= labels
    deep_runs = {"GET /v1/deep-runs/{run_id}", "POST /v1/deep-runs/{run_id}/plan", "POST /v1/deep-runs/{run_id}/resume"}
    assert deep_runs | {"POST /v1/deep-runs/{run_id}/clarification", "POST /v1/deep-runs/{run_id}/cancel"} <= labels
    assert labels >= SEMANTIC_BODIES  # the exceptions name real operations


@pytest.mark.slow
@pytest.mark.parametrize(("operation", "mode"), CASES)
def test_every_operation_answers_within_its_schema(
    operation: schemathesis.APIOperation, mode: GenerationMode, live: tuple[LiveServer, dict[str, str]]
) -> None:
    server, auth = live

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def fuzz(case: schemathesis.Case) -> None:
        excluded = [positive_data_acceptance] if operation.label in SEMANTIC_BODIES else []
        case.call_and_validate(base_url=server.url, headers=auth, excluded_checks=excluded)

    fuzz()
