"""Every route × every class of hostile input, on SQLite and PostgreSQL: a 4xx in the service's error shape, never a
5xx, never a driver's words — and a character no store can keep is refused naming the field that held it.

The routes come from ``app.routes`` and their inputs from the app's own OpenAPI schema, so a route or a field added
later is swept without touching this file. For each route and each input location (a path parameter, a query
parameter, every string anywhere in a JSON body, a raw body) one request carries one hostile value:

* NUL (``\\u0000``), which PostgreSQL cannot store (it answered 500s and a 503 quoting the SQL);
* a lone surrogate (``\\ud800``), which has no UTF-8 form (over HTTP a URL can only carry its bytes, not it);
* a 1 MB value (bodies stop at the body limit; URLs at the server's line limit);
* deeply nested JSON: 200 levels (past the one JSON reader's limit) and 20 000 (past Python's recursion limit).

One live server (uvicorn, as deployed) per backend and one keep-alive connection for all of it: a request that
crashed the app would reset the connection under the next one, and that fails too.

The tests are defined here and collected once per backend, each backend a module of its own
(``test_hostile_inputs_sqlite.py``, ``test_hostile_inputs_postgresql.py``: ``service_on(backend)`` is its live
service); the backend-free sweep check is collected by the SQLite module only. As one module (158 s) it was among
the suite's longest, and pytest-xdist's ``--dist loadfile`` keeps a module on one process: as two, the halves run
side by side.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from researchcrew.service._app import create_app
from researchcrew.settings import Settings
from tests.service.backends import LiveService, live_service

NUL = "x\u0000y"
SURROGATE = "x\ud800y"
MEGABYTE = "m" * 1_000_000
SHALLOW_DEEP = 200  # past the JSON reader's 64 levels, within what Python's parser survives
VERY_DEEP = 20_000  # past Python's recursion limit
STORE_REFUSED = (NUL, SURROGATE)  # what must be a 422 naming the field
DRIVER_WORDS = ("select ", "insert ", "update ", "psycopg", "asyncpg", "sqlalchemy", "[sql:", "sqlite3")
OPENAI_PREFIXES = ("/v1/chat/", "/v1/models")  # these answer in OpenAI's error shape, not problem+json
RAW_BODY_TYPES = ("text/plain", "text/csv", "application/x-ndjson")
DOCUMENT_UPLOADS = {"/v1/documents"}  # a raw body is a document: any text up to the file limit is one

_APP = create_app(Settings(data_dir=Path(tempfile.gettempdir())))
_SCHEMA = _APP.openapi()


def _deep(levels: int) -> Any:
    """A JSON value nested ``levels`` deep, as a raw fragment (inserted into the body text as it is)."""
    return _Raw("[" * levels + "]" * levels)


@dataclass(frozen=True)
class _Raw:
    text: str


@dataclass
class Probe:
    """One request: a route, where the hostile value is, and what it is."""

    method: str
    path: str  # the route's template, e.g. /v1/sessions/{session_id}
    location: str  # e.g. path.session_id, query.limit, body.inputs.question, body (raw)
    kind: str  # nul, surrogate, megabyte, deep-200, deep-20000
    url: str = ""
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    content_type: str | None = None

    @property
    def id(self) -> str:
        return f"{self.method} {self.path} {self.location} {self.kind}"


# Routes and their inputs ---------------------------------------------------------------------------------------
def _routes() -> list[tuple[str, str]]:
    """(method, path) of every route of the app that takes requests (``app.routes``, nested routers included)."""
    found = []
    for route in iter_route_contexts(_APP.routes):
        methods = route.methods or set()
        if route.path is None or getattr(route, "dependant", None) is None:
            continue  # /openapi.json and the static files: no inputs of ours
        found.extend((method, route.path) for method in sorted(methods - {"HEAD", "OPTIONS"}))
    return found


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = _SCHEMA["components"]["schemas"][name]
    return schema


def _fill(schema: dict[str, Any], depth: int = 0) -> Any:
    """A value of ``schema`` with every string "x" (enough for validation to reach every field)."""
    schema = _resolve(schema)
    if depth > 8:
        return None
    for union in ("anyOf", "oneOf"):
        if union in schema:
            options = [option for option in schema[union] if _resolve(option).get("type") != "null"]
            return _fill(options[0], depth + 1) if options else None
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        value = {name: _fill(prop, depth + 1) for name, prop in schema.get("properties", {}).items()}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not value:
            value["k"] = _fill(extra, depth + 1)
        return value
    if kind == "array":
        return [_fill(schema.get("items", {}), depth + 1)]
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": False}.get(str(kind), "x")


def _string_paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Where strings are in a filled body: every leaf and every dict key is one location."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _string_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _string_paths(child, (*prefix, index))
    elif isinstance(value, str):
        yield prefix


def _replaced(value: Any, at: tuple[str | int, ...], new: Any) -> Any:
    if not at:
        return new
    head, rest = at[0], at[1:]
    if isinstance(value, dict):
        return {key: _replaced(child, rest, new) if key == head else child for key, child in value.items()}
    return [_replaced(child, rest, new) if index == head else child for index, child in enumerate(value)]


def _encode(value: Any) -> bytes:
    """JSON with lone surrogates escaped (as a client sends them) and raw fragments inserted as they are."""
    fragments: list[str] = []

    def default(item: Any) -> str:
        fragments.append(item.text)
        return f"__raw_{len(fragments) - 1}__"

    text = json.dumps(value, default=default)
    for index, fragment in enumerate(fragments):
        text = text.replace(f'"__raw_{index}__"', fragment)
    return text.encode("ascii")


HOSTILE: dict[str, Any] = {
    "nul": NUL,
    "surrogate": SURROGATE,
    "megabyte": MEGABYTE,
    f"deep-{SHALLOW_DEEP}": _deep(SHALLOW_DEEP),
    f"deep-{VERY_DEEP}": _deep(VERY_DEEP),
}
# Over a URL a value is text: NUL as %00, a surrogate as the bytes a client would send, nesting as brackets (a
# megabyte URL is refused by the server before the app sees it: test_an_overlong_url_is_refused).
URL_HOSTILE = {
    "nul": "x%00y",
    "surrogate": "x%ED%A0%80y",
    f"deep-{SHALLOW_DEEP}": "%5B" * SHALLOW_DEEP,
}


def _url(path: str, names: list[str], hostile: str | None = None, value: str = "") -> str:
    """``path`` with each parameter "x", but ``hostile`` set to ``value``."""
    for name in names:
        path = path.replace("{" + name + "}", value if name == hostile else "x")
    return path


def _probes() -> list[Probe]:
    probes: list[Probe] = []
    for method, path in _routes():
        operation = _SCHEMA["paths"].get(path, {}).get(method.lower(), {})
        parameters = [_resolve(p) for p in operation.get("parameters", [])]
        names = {p["in"]: [q["name"] for q in parameters if q["in"] == p["in"]] for p in parameters}
        path_names = names.get("path", [])
        query_names = names.get("query", []) or ["anything"]  # an undeclared parameter must not slip by either

        for kind, value in URL_HOSTILE.items():
            for name in path_names:
                probes.append(Probe(method, path, f"path.{name}", kind, url=_url(path, path_names, name, value)))
            for name in query_names:
                probes.append(
                    Probe(method, path, f"query.{name}", kind, url=_url(path, path_names) + f"?{name}={value}")
                )
        content = operation.get("requestBody", {}).get("content", {})
        if "application/json" in content:
            body = _fill(content["application/json"]["schema"])
            for at in _string_paths(body):
                location = ".".join(["body", *map(str, at)])
                for kind, value in HOSTILE.items():
                    encoded = _encode(_replaced(body, at, value))
                    probes.append(Probe(method, path, location, kind, url=_url(path, path_names), content=encoded))
        for media in (media for media in content if media in RAW_BODY_TYPES):
            raw = {
                "nul": f'{{"question": "{NUL}"}}\n{NUL}\n'.encode(),
                # in a JSON line, as its escape; in text, as the bytes of its would-be UTF-8 form
                "surrogate": b'{"question": "x\\ud800y"}\n' if "json" in media else b"x\xed\xa0\x80y\n",
                "megabyte": MEGABYTE.encode(),
                f"deep-{VERY_DEEP}": ('{"question": ' + _deep(VERY_DEEP).text + "}\n").encode(),
            }
            for kind, data in raw.items():
                where = f"body ({media})"
                probes.append(
                    Probe(
                        method,
                        path,
                        where,
                        kind,
                        url=_url(path, path_names) + "?name=j",
                        content=data,
                        content_type=media,
                    )
                )
    return probes


PROBES = _probes()


def test_the_sweep_covers_every_route_and_input() -> None:
    routes = {(probe.method, probe.path) for probe in PROBES}
    assert routes == set(_routes())
    locations = {(probe.path, probe.location) for probe in PROBES}
    assert ("/v1/sessions", "body.title") in locations
    assert ("/v1/sessions/{session_id}/messages", "body.question") in locations
    assert ("/kickoff", "body.inputs.question") in locations
    assert ("/v1/jobs", "body.questions.0") in locations
    assert ("/v1/jobs/{job}", "path.job") in locations
    assert ("/v1/jobs/upload", "body (application/x-ndjson)") in locations
    assert ("/v1/chat/completions", "body.messages.0.content") in locations


def service_on(backend: str) -> Callable[..., Iterator[LiveService]]:
    """The ``service`` fixture of a module that sweeps ``backend`` ("sqlite" or "postgresql"): one app per module."""

    @pytest.fixture(scope="module")
    def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
        with live_service(tmp_path_factory.mktemp("hostile"), backend, prefix="rc_hostile") as live:
            yield live

    return service


@pytest.fixture(scope="module")
def http(service: LiveService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.server.url, headers=service.auth, timeout=60) as client:
        yield client


def _send(http: httpx.Client, probe: Probe) -> httpx.Response:
    headers = {"content-type": probe.content_type or "application/json"} if probe.content is not None else {}
    return http.request(probe.method, probe.url, content=probe.content, headers=headers)


def _check(probe: Probe, response: httpx.Response) -> list[str]:
    """What is wrong with the answer to ``probe`` (nothing: an empty list)."""
    problems = []
    text = response.text.lower()
    if response.status_code >= 500:
        problems.append(f"{response.status_code}: {response.text[:300]}")
    if response.status_code >= 400 or "json" in response.headers.get("content-type", ""):  # not the page's <select>
        problems += [f"driver's words ({word!r}): {response.text[:300]}" for word in DRIVER_WORDS if word in text]
    if response.status_code < 400:
        harmless = probe.location.startswith(("path.", "query.")) and probe.kind != "nul"  # U+FFFD, brackets
        # An uploaded document's raw body is a file: text in another encoding is decoded, brackets are text.
        harmless |= probe.path in DOCUMENT_UPLOADS and probe.location.startswith("body (") and probe.kind != "nul"
        return problems if harmless else [*problems, f"accepted ({response.status_code})"]
    openai = probe.path.startswith(OPENAI_PREFIXES)
    media = response.headers.get("content-type", "")
    if openai and not media.startswith("application/problem+json"):  # the body limit answers before the route
        if "error" not in response.json():
            problems.append(f"not an OpenAI error: {response.text[:200]}")
        return problems
    if not media.startswith("application/problem+json"):
        problems.append(f"{media}, not application/problem+json: {response.text[:200]}")
        return problems
    body = response.json()
    store_refused = probe.kind in ("nul", "surrogate") and probe.location.startswith("body.")
    if store_refused or (probe.kind == "nul" and probe.location.startswith(("path.", "query."))):
        named = [error["location"] for error in body.get("errors", [])]
        if response.status_code != 422 or not any(_names(location, probe.location) for location in named):
            problems.append(f"{response.status_code}, not a 422 naming {probe.location}: {response.text[:300]}")
    return problems


def _names(reported: str, location: str) -> bool:
    """``body.questions`` names ``body.questions.0``; ``body.inputs.question`` names itself."""
    return location == reported or location.startswith(reported + ".")


def test_every_route_refuses_every_hostile_input(service: LiveService, http: httpx.Client) -> None:
    failures: list[str] = []
    for probe in PROBES:
        try:
            response = _send(http, probe)
        except httpx.HTTPError as error:  # a reset connection: the app crashed under the previous request
            failures.append(f"{probe.id}: {type(error).__name__}: {error}")
            continue
        failures += [f"{probe.id}: {problem}" for problem in _check(probe, response)]
    assert not failures, f"{len(failures)} of {len(PROBES)} probes on {service.backend}:\n" + "\n".join(failures)


def test_an_overlong_url_is_refused(service: LiveService, http: httpx.Client) -> None:
    long = "m" * 60_000  # as long as httpx sends (a megabyte URL never leaves a client)
    for url in ("/v1/sessions/" + long, "/v1/sessions?limit=" + long, "/v1/jobs/upload?name=" + long):
        try:
            response = http.get(url)
        except httpx.RemoteProtocolError:
            continue  # the server closed the connection on the over-long request line: refused, not served
        assert 400 <= response.status_code < 500, response.text[:200]
    assert http.get("/healthz").status_code == 200  # and the server still answers


def test_a_deep_jsonl_line_is_a_422_and_the_connection_lives_on(service: LiveService, http: httpx.Client) -> None:
    """Issue 17 item 6: this line answered 500 (RecursionError) and reset the keep-alive connection."""
    line = '{"question": ' + "[" * VERY_DEEP + "]" * VERY_DEEP + "}\n"
    response = http.post(
        "/v1/jobs/upload?name=deep", content=line.encode(), headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 422, response.text[:300]
    assert "line 1: nested too deeply" in response.json()["detail"]
    assert http.get("/v1/jobs").status_code == 200  # the same connection still serves


def test_a_nul_is_refused_alike_on_every_backend(service: LiveService, http: httpx.Client) -> None:
    """Issue 17 item 2, as reported: a session title, a question, a job question and a path id."""
    assert http.post("/v1/sessions", json={"title": NUL}).json()["errors"][0]["location"] == "body.title"
    session = http.post("/v1/sessions", json={"title": "fine"}).json()["session_id"]
    asked = http.post(f"/v1/sessions/{session}/messages", json={"question": NUL})
    assert asked.status_code == 422 and asked.json()["errors"][0]["location"] == "body.question"
    job = http.post("/v1/jobs", json={"name": "j", "questions": ["what is " + NUL]})
    assert job.status_code == 422 and job.json()["errors"][0]["location"] == "body.questions"
    for url in ("/v1/sessions/a%00b", "/v1/jobs/a%00b", "/v1/runs/a%00b", "/v1/deep-runs/a%00b"):
        response = http.get(url)
        assert response.status_code == 422, (url, response.text[:300])
        assert response.json()["errors"][0]["location"].startswith("path."), response.text
    assert http.get("/v1/sessions").status_code == 200


def test_a_flag_is_a_json_boolean_on_every_door(service: LiveService, http: httpx.Client) -> None:
    """A flag given as a number or a word ("include_sections": 0.0, "remember": "yes", "stream": 1) was taken as
    true or false by pydantic's lax coercion, though the schema says boolean: it is refused, naming the field."""
    session = http.post("/v1/sessions", json={"title": "flags"}).json()["session_id"]
    for value in (0.0, 1, "yes", "false"):
        asked = http.post(
            f"/v1/sessions/{session}/messages",
            json={"question": "what is QuickCheck?", "response": {"include_sections": value}},
        )
        assert asked.status_code == 422, (value, asked.text[:300])
        assert asked.json()["errors"][0]["location"] == "body.response.include_sections"
    job = http.post("/v1/jobs", json={"name": "flags", "questions": ["what is QuickCheck?"], "remember": "yes"})
    assert job.status_code == 422 and job.json()["errors"][0]["location"] == "body.remember", job.text[:300]
    chat = http.post(
        "/v1/chat/completions",
        json={"model": "researchcrew", "messages": [{"role": "user", "content": "what is QuickCheck?"}], "stream": 1},
    )
    assert 400 <= chat.status_code < 500 and "stream" in chat.text, chat.text[:300]
    assert all(job["name"] != "flags" for job in http.get("/v1/jobs").json()["jobs"])  # the refused job: not made


def test_a_tool_option_is_keyed_by_a_source_type_on_every_door(service: LiveService, http: httpx.Client) -> None:
    """``tool_options`` keyed by something no source type can be (not lower-case letters, digits, "_" or "-")
    passed the door and failed the pipeline with a 500 when it built the retriever's input (the schema fuzz found
    "½0"): it is a 422 naming the field on every door that takes tool options, and no job is made of it. A key with
    spaces around a source type (" web") is refused too, as the schema says: stripped, it would fold into "web"
    beside it and one of the two sets of options would be dropped without a word."""
    session = http.post("/v1/sessions", json={"title": "tool options"}).json()["session_id"]
    for bad in ({"\x83½0": {"limit": 1}}, {"web": {"limit": 1}, " web": {"limit": 5}}):
        doors = {
            "/v1/ask": {"question": "what is QuickCheck?", "tool_options": bad},
            f"/v1/sessions/{session}/messages": {"question": "what is QuickCheck?", "tool_options": bad},
            "/v1/jobs": {"name": "bad-options", "questions": ["what is QuickCheck?"], "tool_options": bad},
        }
        for url, body in doors.items():
            response = http.post(url, json=body)
            assert response.status_code == 422, (bad, url, response.status_code, response.text[:300])
            assert response.json()["errors"][0]["location"].startswith("body.tool_options"), (url, response.text[:300])
        chat = http.post(
            "/v1/chat/completions",
            json={
                "model": "researchcrew",
                "messages": [{"role": "user", "content": "what is QuickCheck?"}],
                "researchcrew": {"tool_options": bad},
            },
        )
        assert 400 <= chat.status_code < 500 and "tool_options" in chat.text, (bad, chat.text[:300])
    assert all(job["name"] != "bad-options" for job in http.get("/v1/jobs").json()["jobs"])
