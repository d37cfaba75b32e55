"""ZepMemory against a loopback Zep speaking the v2 routes, through the real zep-python 2.0.2 client."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from researchcrew.errors import MemoryStoreError, ToolError
from researchcrew.memory.outbox import turn_write
from researchcrew.memory.store import message_id
from researchcrew.memory.zep import ZepError, ZepMemory, ZepMessage, zep_session_id
from tests.loopback.server import LoopbackServer, Reply, closed_port
from tests.loopback.zep import FakeZep
from tests.memory_logic.conftest import API_KEY, turn, zep_settings


def _messages(user_id: str, session_id: str, question: str, answer: str, **kw: Any) -> list[ZepMessage]:
    query, response = turn(user_id, session_id, question, answer, **kw)
    write = turn_write(user_id=user_id, session_id=session_id, query=query, response=response)
    assert write is not None
    return [ZepMessage.model_validate(m) for m in write.payload["messages"]]


async def test_a_turn_is_mirrored_with_role_types_our_ids_and_the_api_key(
    zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    messages = _messages("ada", "s1", "What is SciFact?", "SciFact is a claim verification dataset [1].")

    outcome = await zep.deliver_turn(user_id="ada", session_id="s1", messages=messages)

    assert outcome == "delivered"
    zid = zep_session_id("ada", "s1")
    assert [(r.method, r.path) for r in zep_server.requests] == [
        ("POST", "/api/v2/users"),
        ("POST", "/api/v2/sessions"),
        ("POST", f"/api/v2/sessions/{zid}/memory"),
    ]
    assert all(r.headers["authorization"] == f"Api-Key {API_KEY}" for r in zep_server.requests)
    assert zep_server.requests[0].json() == {"metadata": {"created_by": "researchcrew"}, "user_id": "ada"}
    session_body = zep_server.requests[1].json()
    assert session_body["session_id"] == zid and session_body["user_id"] == "ada"
    assert session_body["metadata"]["researchcrew_session_id"] == "s1"
    sent = zep_server.requests[2].json()["messages"]
    assert [(m["role"], m["role_type"], m["content"]) for m in sent] == [
        ("user", "user", "What is SciFact?"),
        ("assistant", "assistant", "SciFact is a claim verification dataset [1]."),
    ]
    response_id = sent[0]["metadata"]["researchcrew_response_id"]
    for message, role in zip(sent, ("user", "assistant"), strict=True):
        assert message["uuid"] == message_id(response_id, role)  # our stable id is Zep's message uuid ...
        assert message["metadata"]["researchcrew_message_id"] == message["uuid"]  # ... and is in the metadata
        assert message["metadata"]["researchcrew_user_id"] == "ada"
    assert sent[1]["metadata"]["question"] == "What is SciFact?"
    assert fake_zep.message_ids_received() == [m["uuid"] for m in sent]


async def test_the_sdk_sends_what_the_captured_requests_show(
    zep: ZepMemory, zep_server: LoopbackServer, fixtures_dir: Path
) -> None:
    """Same headers and body shape as zep-python 2.0.2 sent to the stub in the recorded fixture."""
    captured = json.loads((fixtures_dir / "zep" / "sdk_2.0.2_captured_requests.json").read_text())
    recorded_add = next(r for r in captured if r["url"].endswith("/memory") and r["method"] == "POST")
    await zep.deliver_turn(user_id="ada", session_id="s1", messages=_messages("ada", "s1", "Q?", "A."))
    ours = zep_server.requests[-1]
    for header, value in recorded_add["headers"].items():
        assert ours.headers[header.lower()] == value
    recorded_keys = {k for m in recorded_add["body"]["messages"] for k in m}
    assert recorded_keys <= set(ours.json()["messages"][1]) | {"metadata"}
    assert set(ours.json()) == set(recorded_add["body"])  # no fact/summary instruction keys sent


async def test_users_and_sessions_that_already_exist_are_fine_and_delivery_is_idempotent(
    zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    messages = _messages("ada", "s1", "What is BM25?", "A ranking function.")
    first, second = ZepMemory(zep_settings(zep_server.url)), ZepMemory(zep_settings(zep_server.url))
    try:
        assert await first.deliver_turn(user_id="ada", session_id="s1", messages=messages) == "delivered"
        # A second process knows nothing: user and session "already exist" (400, confirmed by a GET), and Zep
        # refuses the same message uuids, which counts as delivered.
        assert await second.deliver_turn(user_id="ada", session_id="s1", messages=messages) == "already_delivered"
    finally:
        await first.aclose()
        await second.aclose()
    paths = [(r.method, r.path) for r in zep_server.requests[3:]]
    zid = zep_session_id("ada", "s1")
    assert paths == [
        ("POST", "/api/v2/users"),
        ("GET", "/api/v2/users/ada"),
        ("POST", "/api/v2/sessions"),
        ("GET", f"/api/v2/sessions/{zid}"),
        ("POST", f"/api/v2/sessions/{zid}/memory"),
    ]
    assert len(fake_zep.all_messages()) == 2 and fake_zep.duplicates() == {}


async def test_a_retry_finds_the_turn_by_uuid_and_does_not_post_it_again(
    zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    messages = _messages("ada", "s1", "What is NDCG?", "A ranking metric.")
    await zep.deliver_turn(user_id="ada", session_id="s1", messages=messages)
    posts = len(zep_server.requests_to(f"/api/v2/sessions/{zep_session_id('ada', 's1')}/memory"))

    assert await zep.deliver_turn(user_id="ada", session_id="s1", messages=messages, retry=True) == "already_delivered"
    assert len(zep_server.requests_to(f"/api/v2/sessions/{zep_session_id('ada', 's1')}/memory")) == posts
    assert fake_zep.duplicates() == {}


async def test_a_retry_against_a_server_that_ignores_our_uuids_finds_the_turn_by_metadata(
    zep: ZepMemory, fake_zep: FakeZep
) -> None:
    fake_zep.honour_uuids = False
    for i in range(150):  # enough messages for the lookup to page backwards
        await zep.deliver_turn(user_id="ada", session_id="s1", messages=_messages("ada", "s1", f"q{i}", f"a{i}"))
    early = _messages("ada", "s1", "What is MRR?", "Mean reciprocal rank.")
    await zep.deliver_turn(user_id="ada", session_id="s1", messages=early)
    for i in range(30):
        await zep.deliver_turn(user_id="ada", session_id="s1", messages=_messages("ada", "s1", f"r{i}", f"b{i}"))

    assert await zep.deliver_turn(user_id="ada", session_id="s1", messages=early, retry=True) == "already_delivered"
    fresh = _messages("ada", "s1", "What is MAP?", "Mean average precision.")
    assert await zep.deliver_turn(user_id="ada", session_id="s1", messages=fresh, retry=True) == "delivered"
    assert fake_zep.duplicates() == {}


async def test_a_session_owned_by_another_user_is_refused(zep: ZepMemory, fake_zep: FakeZep) -> None:
    zid = zep_session_id("ada", "s1")
    fake_zep.users["mallory"] = {"user_id": "mallory"}
    fake_zep.sessions[zid] = {"session_id": zid, "user_id": "mallory"}

    with pytest.raises(ZepError) as caught:
        await zep.deliver_turn(user_id="ada", session_id="s1", messages=_messages("ada", "s1", "Q?", "A."))

    assert caught.value.kind == "invalid_request" and not caught.value.retryable
    assert fake_zep.all_messages() == []


async def test_the_same_session_name_of_two_users_maps_to_two_zep_sessions(zep: ZepMemory, fake_zep: FakeZep) -> None:
    await zep.deliver_turn(user_id="ada", session_id="default", messages=_messages("ada", "default", "Q1?", "A1."))
    await zep.deliver_turn(user_id="bob", session_id="default", messages=_messages("bob", "default", "Q2?", "A2."))
    owners = {s["user_id"] for s in fake_zep.sessions.values()}
    assert owners == {"ada", "bob"} and len(fake_zep.sessions) == 2


async def test_ids_with_slashes_and_spaces_stay_one_path_segment(
    zep: ZepMemory, zep_server: LoopbackServer, fake_zep: FakeZep
) -> None:
    await zep.deliver_turn(user_id="team a/ada", session_id="s 1", messages=_messages("team a/ada", "s 1", "Q?", "A."))
    fake_zep.users.pop("team a/ada")
    second = ZepMemory(zep_settings(zep_server.url))
    try:
        fake_zep.users["team a/ada"] = {"user_id": "team a/ada"}
        await second.ensure_user("team a/ada")
    finally:
        await second.aclose()
    assert zep_server.requests[-1].path == "/api/v2/users/team%20a%2Fada"


async def test_a_message_over_the_servers_limit_is_sent_truncated(zep: ZepMemory, fake_zep: FakeZep) -> None:
    fake_zep.max_message_chars = 2_500  # Zep's free plan
    long_answer = "Dense retrieval encodes passages. " * 200
    outcome = await zep.deliver_turn(
        user_id="ada", session_id="s1", messages=_messages("ada", "s1", "Explain DPR", long_answer)
    )
    assert outcome == "delivered"
    stored = fake_zep.all_messages()
    assert len(stored[1]["content"]) <= 2_500 and stored[1]["content"].endswith("[…]")
    assert stored[1]["metadata"]["truncated"] is True


# ---- failures map to ZepError kinds -----------------------------------------------------------------------------


def _route(reply: Reply) -> Any:
    return lambda request: reply


@pytest.mark.parametrize(
    ("reply", "kind", "status", "retryable"),
    [
        (Reply.json({"message": "service unavailable"}, status=503), "http_error", 503, True),
        (Reply.json({"message": "boom"}, status=500), "http_error", 500, True),
        (Reply.text("<html>bad gateway</html>", status=502, content_type="text/html"), "http_error", 502, True),
        (Reply.json({"message": "too many concurrent writes"}, status=429), "http_error", 429, True),
        (Reply.json({"message": "unauthorized"}, status=401), "http_error", 401, True),
        (Reply.json({"message": "bad request: invalid"}, status=400), "http_error", 400, False),
        (Reply.text("{not json", status=201, content_type="application/json"), "bad_response", None, True),
        (Reply.json({"uuid": ["not", "a", "string"]}, status=201), "bad_response", None, True),
        (Reply(drop_connection=True), "unreachable", None, True),
    ],
)
async def test_zep_failures_become_named_error_kinds(
    reply: Reply, kind: str, status: int | None, retryable: bool
) -> None:
    with LoopbackServer(_route(reply)) as server:
        zep = ZepMemory(zep_settings(server.url))
        try:
            with pytest.raises(ZepError) as caught:
                await zep.ensure_user("ada")
        finally:
            await zep.aclose()
    error = caught.value
    assert (error.kind, error.status_code, error.retryable) == (kind, status, retryable)
    assert isinstance(error, MemoryStoreError) and isinstance(error, ToolError)
    assert "Zep user.add" in error.message


async def test_connection_refused_is_unreachable() -> None:
    zep = ZepMemory(zep_settings(f"http://127.0.0.1:{closed_port()}"))
    try:
        with pytest.raises(ZepError) as caught:
            await zep.ensure_user("ada")
    finally:
        await zep.aclose()
    assert caught.value.kind == "unreachable" and caught.value.retryable


async def test_a_hung_zep_is_cut_off_at_the_timeout() -> None:
    with LoopbackServer(_route(Reply.json({}, delay_s=10))) as server:
        zep = ZepMemory(zep_settings(server.url, timeout_s=0.3))
        started = time.monotonic()
        try:
            with pytest.raises(ZepError) as caught:
                await zep.ensure_user("ada")
        finally:
            await zep.aclose()
    assert caught.value.kind == "timeout" and caught.value.retryable
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(("url", "key", "missing"), [(None, "k", "ZEP_API_URL"), ("http://127.0.0.1:1", None, "KEY")])
def test_zep_without_url_or_key_is_not_configured(url: str | None, key: str | None, missing: str) -> None:
    from researchcrew.settings import ZepSettings

    with pytest.raises(ZepError) as caught:
        ZepMemory(ZepSettings(api_url=url, api_key=key))
    assert caught.value.kind == "not_configured" and missing in caught.value.message


async def test_our_setting_wins_over_the_zep_api_url_variable_the_sdk_reads_itself(
    monkeypatch: pytest.MonkeyPatch, zep_server: LoopbackServer
) -> None:
    monkeypatch.setenv("ZEP_API_URL", f"http://127.0.0.1:{closed_port()}")
    zep = ZepMemory(zep_settings(zep_server.url))
    try:
        await zep.ensure_user("ada")
    finally:
        await zep.aclose()
    assert zep_server.requests_to("/api/v2/users")


async def test_deleting_a_user_is_idempotent(zep: ZepMemory, fake_zep: FakeZep) -> None:
    await zep.deliver_turn(user_id="ada", session_id="s1", messages=_messages("ada", "s1", "Q?", "A."))
    assert await zep.delete_user("ada") == "deleted"
    assert fake_zep.users == {} and fake_zep.all_messages() == []
    assert await zep.delete_user("ada") == "absent"
