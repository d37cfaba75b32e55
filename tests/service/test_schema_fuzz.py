"""Fuzz the service's OpenAPI schema with schemathesis: a bounded number of generated requests per operation
(valid ones, then invalid ones) against a real uvicorn on each memory-store backend (SQLite and PostgreSQL); no
5xx, and every response (status code, content type, headers, body) matches the schema. Generation is derandomized:
the same cases every run.

A generated string may hold a character no store can keep (NUL; JSON Schema cannot say "no NUL"): such a request is
refused with a 4xx on both backends (PostgreSQL answered it with a 500), instead of being accepted.

The operations come from the app's own schema; each is a test of its own per backend, driven by hypothesis through
schemathesis' strategies (schemathesis' pytest plugin does not run on this pytest release).

Both backends are sent the same requests: derandomized generation draws the same cases for the same operation and
mode whichever server answers them, and drawing them is most of the fuzz's CPU (schemathesis turning the schema into
strategies, hypothesis drawing from them: about 40 of a backend's 70 s). So the first backend's run keeps the cases it
sent (``_DRAWN``), and the second one, run after it in the same process (pytest runs a module-scoped parameter's
tests together), sends those again instead of drawing them anew. A case is kept only from a run that passed; a
backend run alone draws its own.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from researchcrew.service._app import create_app
from researchcrew.settings import Settings
from tests.service.backends import BACKENDS, LiveService, live_service

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates: PostgreSQL keeps neither
MAX_EXAMPLES = 20  # per operation, generation mode and backend: each backend's fuzz stays within about a minute
# Bodies whose validity JSON Schema cannot state (a cron expression, the lines of a question file, options checked
# against each other, a document the loaders cannot read): a schema-valid request may still get its 422 naming the
# problem. Every other check runs. GET /v1/usage: its `since` has a pattern, but a date such as 2026-02-30 matches it
# and is no date.
SEMANTIC_BODIES = {"POST /v1/jobs", "POST /v1/jobs/upload", "POST /kickoff", "POST /v1/documents", "GET /v1/usage"}

_SCHEMA = schemathesis.openapi.from_dict(create_app(Settings(data_dir=Path(tempfile.gettempdir()))).openapi())
OPERATIONS = [result.ok() for result in _SCHEMA.get_all_operations()]
# Invalid requests exist only for operations that take something (a path, a query, a body).
CASES = [
    pytest.param(operation, mode, id=f"{operation.label}-{mode.value}")
    for operation in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or len(operation.path_parameters) + len(operation.query) + len(operation.body)
]


@pytest.fixture(scope="module", params=BACKENDS)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """The app on one memory-store backend ("sqlite", "postgresql"), served for the module's tests of that backend."""
    with live_service(tmp_path_factory.mktemp("fuzz"), request.param, prefix="rc_fuzz") as service:
        yield service


# The cases a passing run drew, per test and operation (with its mode), for the next backend to send again.
_DRAWN: dict[tuple[str, str], list[schemathesis.Case]] = {}


def _fuzz(
    key: tuple[str, str],
    strategy: st.SearchStrategy[schemathesis.Case],
    max_examples: int,
    check: Callable[[schemathesis.Case], None],
) -> None:
    """``check`` every case that ``strategy`` draws (derandomized, ``max_examples`` of them), or, when an earlier
    backend's run already drew and passed them, every case it drew, in the same order."""
    drawn = _DRAWN.get(key)
    if drawn is not None:
        for case in drawn:  # sending a case freezes it as drawn; each send names its own server (base_url)
            check(case)
        return
    sent: list[schemathesis.Case] = []

    @given(case=strategy)
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def fuzz(case: schemathesis.Case) -> None:
        sent.append(case)
        check(case)

    fuzz()
    _DRAWN[key] = sent


def _unstorable(value: Any) -> bool:
    """Whether a generated input holds a character no store can keep, anywhere."""
    if isinstance(value, str):
        return UNSTORABLE.search(value) is not None
    if isinstance(value, dict):
        return any(_unstorable(key) or _unstorable(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_unstorable(item) for item in value)
    return False


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
    operation: schemathesis.APIOperation, mode: GenerationMode, live: LiveService
) -> None:
    server, auth = live.server, live.auth

    def check(case: schemathesis.Case) -> None:
        inputs = (case.path_parameters, case.query, case.body)
        unstorable = any(_unstorable(value) for value in inputs)
        excluded = [positive_data_acceptance] if operation.label in SEMANTIC_BODIES or unstorable else []
        response = case.call_and_validate(base_url=server.url, headers=auth, excluded_checks=excluded)
        if unstorable:  # refused, naming the field (problem+json or OpenAI's shape), on every backend
            assert 400 <= response.status_code < 500, (live.backend, response.status_code, response.text[:300])

    _fuzz(
        (f"{operation.label}-{mode.value}", "schema"), operation.as_strategy(generation_mode=mode), MAX_EXAMPLES, check
    )


def _tainted(value: Any) -> Any:
    """``value`` with a NUL appended to every string value in it (not to names: they would be unknown ones)."""
    if isinstance(value, str):
        return value + "\x00"
    if isinstance(value, dict):
        return {key: _tainted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_tainted(item) for item in value]
    return value


def _taint(case: schemathesis.Case) -> schemathesis.Case:
    """A schema-valid case whose every string value (path, query, JSON body) holds a NUL. (Lone surrogates cannot
    travel in a URL and schemathesis cannot encode them in a body: hostile_inputs.py sends those.)"""
    case.path_parameters = _tainted(case.path_parameters)
    case.query = _tainted(case.query)
    if isinstance(case.body, dict | list | str):
        case.body = _tainted(case.body)
    return case


TAINT_EXAMPLES = 8
TAINTED = [
    pytest.param(operation, id=operation.label)
    for operation in OPERATIONS
    if len(operation.path_parameters) + len(operation.query) + len(operation.body)
]


@pytest.mark.slow
@pytest.mark.parametrize("operation", TAINTED)
def test_a_nul_in_any_string_is_refused(operation: schemathesis.APIOperation, live: LiveService) -> None:
    """Valid requests but for a NUL in every string: a 4xx on SQLite and PostgreSQL alike (PostgreSQL answered
    500, or 503 quoting the SQL; SQLite stored it)."""

    def check(case: schemathesis.Case) -> None:
        if not any(_unstorable(value) for value in (case.path_parameters, case.query, case.body)):
            return  # nothing to taint in this example (e.g. an empty optional body)
        response = case.call_and_validate(
            base_url=live.server.url, headers=live.auth, excluded_checks=[positive_data_acceptance]
        )
        assert 400 <= response.status_code < 500, (live.backend, response.status_code, response.text[:300])

    strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE).map(_taint)
    _fuzz((operation.label, "nul"), strategy, TAINT_EXAMPLES, check)
