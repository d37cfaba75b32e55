"""The native API through its ASGI app: keys, sessions, asking, and every failure in the one problem+json shape."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.contracts.request import ResearchRequest
from researchcrew.service._questions import MessageRequest
from researchcrew.service.accounts import Accounts
from researchcrew.testing import FakeTool, fake_chunk
from tests.service.support import EVIDENCE, QUESTION, ServiceHarness, running_service, service_settings

PROBLEM_FIELDS = {"type", "title", "status", "detail"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert set(body) >= PROBLEM_FIELDS and body["status"] == status
    assert "Traceback" not in response.text and "rc_" not in response.text  # no stack traces, no key material
    return dict(body)


async def new_session(client: httpx.AsyncClient, service: ServiceHarness, user: str = "ada", **body: Any) -> str:
    response = await client.post("/v1/sessions", headers=service.auth(user), json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


async def test_health_and_readiness_need_no_key(client: httpx.AsyncClient) -> None:
    health = await client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    ready = (await client.get("/readyz")).json()
    assert ready["ready"] is True
    assert ready["checks"]["memory_store"] == {"ok": True, "detail": "sqlite answers"}
    assert ready["sources"] == ["rag"]


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer not-a-key", "Basic YWRhOnB3", "Bearer rc_000000000000_" + "A" * 43],
)
async def test_requests_without_a_valid_key_answer_401(client: httpx.AsyncClient, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    body = assert_problem(await client.get("/v1/sessions", headers=headers), 401)
    assert body["title"] == "Unauthorized"


async def test_a_key_with_the_right_id_and_a_wrong_secret_is_refused(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    prefix, key_id, secret = service.keys["ada"].split("_", 2)
    forged = f"{prefix}_{key_id}_{'A' * len(secret)}"
    assert_problem(await client.get("/v1/sessions", headers={"Authorization": f"Bearer {forged}"}), 401)


async def test_a_revoked_key_stops_working_and_a_new_one_works(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    accounts = Accounts(await service.runtime.memory_store())
    assert (await client.get("/v1/sessions", headers=service.auth("ada"))).status_code == 200
    assert await accounts.revoke("ada") == ("ada", 1)
    assert_problem(await client.get("/v1/sessions", headers=service.auth("ada")), 401)
    await service.add_user("ada")  # reinstated with a new key
    assert (await client.get("/v1/sessions", headers=service.auth("ada"))).status_code == 200


async def test_sessions_are_created_listed_renamed_and_deleted(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    first = await new_session(client, service, title="Testing oracles")
    second = await new_session(client, service)
    listed = (await client.get("/v1/sessions", headers=service.auth("ada"))).json()["sessions"]
    assert [s["session_id"] for s in listed] == [second, first]  # most recently used first
    renamed = await client.patch(f"/v1/sessions/{second}", headers=service.auth("ada"), json={"title": "Oracles"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Oracles"
    deleted = await client.delete(f"/v1/sessions/{first}", headers=service.auth("ada"))
    assert deleted.status_code == 204 and deleted.content == b""
    listed = (await client.get("/v1/sessions", headers=service.auth("ada"))).json()["sessions"]
    assert [s["session_id"] for s in listed] == [second]
    assert_problem(await client.get(f"/v1/sessions/{first}", headers=service.auth("ada")), 404)


async def test_another_users_session_answers_exactly_like_a_missing_one(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    adas = await new_session(client, service, "ada")
    as_bob = service.auth("bob")
    for method, suffix, body in (
        ("GET", "", None),
        ("PATCH", "", {"title": "mine now"}),
        ("DELETE", "", None),
        ("POST", "/messages", {"question": QUESTION}),
    ):
        theirs = await client.request(method, f"/v1/sessions/{adas}{suffix}", headers=as_bob, json=body)
        missing = await client.request(method, f"/v1/sessions/{'0' * 32}{suffix}", headers=as_bob, json=body)
        assert_problem(theirs, 404)
        assert theirs.json() | {"detail": ""} == missing.json() | {"detail": ""}
        assert adas not in missing.text
    still = await client.get(f"/v1/sessions/{adas}", headers=service.auth("ada"))
    assert still.status_code == 200 and still.json()["session"]["title"] == ""  # bob changed nothing
    assert (await client.get("/v1/sessions", headers=as_bob)).json()["sessions"] == []


async def test_asking_returns_the_cited_answer_and_the_session_keeps_it(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    session_id = await new_session(client, service)
    response = await client.post(
        f"/v1/sessions/{session_id}/messages",
        headers=service.auth("ada"),
        json={"question": QUESTION, "response": {"response_format": "concise"}, "exclude_sources": ["web"]},
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["query"]["user_id"] == "ada" and answer["query"]["session_id"] == session_id
    assert answer["answer_kind"] == "extractive" and answer["citations"][0]["number"] == 1
    assert "Metamorphic testing checks relations" in answer["answer"]
    assert await service.runtime.flush_memory(timeout_s=60)

    read = (await client.get(f"/v1/sessions/{session_id}", headers=service.auth("ada"))).json()
    assert read["session"]["title"] == QUESTION  # an untitled session takes its first question
    assert read["session"]["exchanges"] == 1
    (exchange,) = read["exchanges"]
    assert exchange["response_id"] == answer["response_id"]
    assert exchange["question"] == QUESTION and exchange["answer"] == answer["answer"]
    assert exchange["citations"] == answer["citations"]
    assert [r["source_type"] for r in exchange["source_reports"]] == ["rag"]


async def test_the_user_id_never_comes_from_the_body(client: httpx.AsyncClient, service: ServiceHarness) -> None:
    session_id = await new_session(client, service)
    for field in ("user_id", "session_id"):
        response = await client.post(
            f"/v1/sessions/{session_id}/messages",
            headers=service.auth("ada"),
            json={"question": QUESTION, field: "bob"},
        )
        body = assert_problem(response, 422)
        assert body["errors"][0]["location"] == f"body.{field}"


async def test_deleting_a_session_deletes_its_exchanges_and_recall_forgets_them(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    keep, drop = await new_session(client, service), await new_session(client, service)
    for session_id in (keep, drop):
        response = await client.post(
            f"/v1/sessions/{session_id}/messages", headers=service.auth("ada"), json={"question": QUESTION}
        )
        assert response.status_code == 200
    assert await service.runtime.flush_memory(timeout_s=60)
    store = await service.runtime.memory_store()
    assert {r.session_id for r in await store.recall(user_id="ada", query_text=QUESTION, limit=5)} == {keep, drop}
    assert (await client.delete(f"/v1/sessions/{drop}", headers=service.auth("ada"))).status_code == 204
    assert {r.session_id for r in await store.recall(user_id="ada", query_text=QUESTION, limit=5)} == {keep}
    exported = await store.export_user(user_id="ada")
    assert {e["session_id"] for e in exported["exchanges"]} == {keep}
    assert [s["session_id"] for s in exported["sessions"]] == [keep]


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({}, "body.question"),
        ({"question": "   "}, "body.question"),
        ({"question": QUESTION, "deadline_s": 0}, "body.deadline_s"),
        ({"question": QUESTION, "exclude_sources": ["Not A Type"]}, "body.exclude_sources.0"),
        ({"question": QUESTION, "response": {"response_format": "poem"}}, "body.response.response_format"),
        ({"question": QUESTION, "surprise": 1}, "body.surprise"),
    ],
)
async def test_invalid_fields_answer_422_naming_the_field(
    client: httpx.AsyncClient, service: ServiceHarness, body: dict[str, Any], location: str
) -> None:
    session_id = await new_session(client, service)
    response = await client.post(f"/v1/sessions/{session_id}/messages", headers=service.auth("ada"), json=body)
    problem = assert_problem(response, 422)
    assert location in [error["location"] for error in problem["errors"]]


async def test_malformed_json_and_unknown_routes_use_the_same_shape(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    session_id = await new_session(client, service)
    broken = await client.post(
        f"/v1/sessions/{session_id}/messages",
        headers={**service.auth("ada"), "Content-Type": "application/json"},
        content=b'{"question": ',
    )
    assert_problem(broken, 422)
    assert_problem(await client.get("/v1/nothing-here", headers=service.auth("ada")), 404)
    assert_problem(await client.put("/v1/sessions", headers=service.auth("ada")), 405)


async def test_oversized_bodies_answer_413_whether_declared_or_streamed(
    client: httpx.AsyncClient, service: ServiceHarness
) -> None:
    session_id = await new_session(client, service)
    url = f"/v1/sessions/{session_id}/messages"
    declared = await client.post(url, headers=service.auth("ada"), json={"question": "x" * 70_000})
    assert_problem(declared, 413)

    async def chunks() -> Any:
        for _ in range(20):
            yield b"x" * 4096

    streamed = await client.post(url, headers=service.auth("ada"), content=chunks())  # chunked: no length
    assert_problem(streamed, 413)
    fine = await client.post(url, headers=service.auth("ada"), json={"question": QUESTION})
    assert fine.status_code == 200


async def test_past_the_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    async with running_service(service_settings(tmp_path, rate_limit="3/minute")) as service, service.client() as c:
        statuses = [(await c.get("/v1/sessions", headers=service.auth("ada"))).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        limited = await c.get("/v1/sessions", headers=service.auth("ada"))
        assert_problem(limited, 429)
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
        assert (await c.get("/v1/sessions", headers=service.auth("bob"))).status_code == 200  # per user


async def test_past_the_concurrent_question_limit_answers_429(tmp_path: Path) -> None:
    slow = FakeTool("rag", chunks=[fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)], delay_s=0.5)
    settings = service_settings(tmp_path, max_concurrent_questions=2)
    async with running_service(settings, tools=[slow]) as service, service.client() as c:
        session_id = await new_session(c, service)
        url = f"/v1/sessions/{session_id}/messages"
        ask = {"question": QUESTION}
        responses = await asyncio.gather(*(c.post(url, headers=service.auth("ada"), json=ask) for _ in range(3)))
        assert sorted(r.status_code for r in responses) == [200, 200, 429]
        limited = next(r for r in responses if r.status_code == 429)
        assert assert_problem(limited, 429)["type"].endswith("too-many-questions")
        assert limited.headers["Retry-After"] == "1"
        again = await c.post(url, headers=service.auth("ada"), json=ask)  # the places were given back
        assert again.status_code == 200
        assert service.app.state.service.throttle.running("ada") == 0


async def test_auth_off_runs_as_the_local_user(tmp_path: Path) -> None:
    async with running_service(service_settings(tmp_path, auth=False)) as service, service.client() as c:
        created = await c.post("/v1/sessions", json={"title": "laptop"})
        assert created.status_code == 201
        listed = await c.get("/v1/sessions", headers={"Authorization": "Bearer whatever"})
        assert [s["title"] for s in listed.json()["sessions"]] == ["laptop"]
        session_id = created.json()["session_id"]
        answer = (await c.post(f"/v1/sessions/{session_id}/messages", json={"question": QUESTION})).json()
        assert answer["query"]["user_id"] == "local"


def test_the_message_body_is_the_research_request_without_user_and_session() -> None:
    assert set(MessageRequest.model_fields) == set(ResearchRequest.model_fields) - {"user_id", "session_id"}


async def test_the_schema_is_served_and_no_page_pulls_scripts_from_a_cdn(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert "/v1/sessions/{session_id}/messages" in schema["paths"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for page in ("/docs", "/redoc"):
        assert_problem(await client.get(page), 404)
