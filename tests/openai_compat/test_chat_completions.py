"""The OpenAI-compatible routes, driven by the official ``openai`` SDK as any client would drive them: answers in
both modes, citations in the content and structured, real token usage, conversations mapped to sessions, and every
failure as the SDK's own exception carrying a message a person can act on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from researchcrew.contracts import FinalResponse
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import MemoryStoreError
from researchcrew.settings import RetrievalSettings, Settings
from researchcrew.testing import FakeLLM, FakeTool, fake_chunk
from tests.openai_compat.support import (
    EVIDENCE,
    QUESTION,
    Harness,
    running_service,
    service_settings,
)
from tests.service.support import live_server

FOLLOW_UP = "What problem does it address?"
DRAFT = json.dumps(
    {
        "sections": [
            {
                "heading": "",
                "perspective": None,
                "claims": [
                    {
                        "text": "Metamorphic testing checks relations between outputs of related inputs.",
                        "citations": [1],
                    }
                ],
            }
        ]
    }
)


class Recorder:
    """Wraps ``runtime.ask``: every request the routes made, and every answer the pipeline gave."""

    def __init__(self, harness: Harness) -> None:
        self.requests: list[ResearchRequest] = []
        self.responses: list[FinalResponse] = []
        self._ask = harness.runtime.ask
        harness.runtime.ask = self.ask  # type: ignore[method-assign]

    async def ask(self, request: ResearchRequest, **options: Any) -> FinalResponse:
        self.requests.append(request)
        response = await self._ask(request, **options)
        self.responses.append(response)
        return response


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Harness]:
    async with running_service(service_settings(tmp_path)) as harness:
        yield harness


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def expected_usage(response: FinalResponse) -> tuple[int, int, int]:
    """What ``usage`` must say: the pipeline's own token count (zeros for an extractive answer)."""
    total = response.token_usage.total
    return (total.prompt_tokens, total.completion_tokens, total.total_tokens)


# ---- answers --------------------------------------------------------------------------------------------------


async def test_a_chat_completion_is_the_cited_answer_with_numbered_references(service: Harness) -> None:
    recorder = Recorder(service)
    async with service.openai() as client:
        completion = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])

    (response,) = recorder.responses
    assert completion.object == "chat.completion"
    assert completion.id == f"chatcmpl-{response.response_id}"
    assert completion.model == "researchcrew"
    (choice,) = completion.choices
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    content = choice.message.content or ""
    assert "Metamorphic testing checks relations between the outputs of related inputs [1]." in content
    assert "- **[1]** [Metamorphic Testing: A Review](https://example.org/metamorphic) — T. Y. Chen" in content
    assert "web (http error: Firecrawl answered HTTP 429)" in content

    details = completion.researchcrew  # type: ignore[attr-defined]  # the extension field, as the SDK keeps it
    assert details["question"] == QUESTION and details["response_id"] == response.response_id
    assert [c["number"] for c in details["citations"]] == [1]
    assert details["citations"][0]["url"] == "https://example.org/metamorphic"
    assert details["citations"][0]["snippet"].startswith("Metamorphic testing checks relations")
    reports = {r["source_type"]: r for r in details["source_reports"]}
    assert reports["rag"]["status"] == "success"
    assert reports["web"]["status"] == "failed" and reports["web"]["failure"]["kind"] == "http_error"
    assert details["answer_kind"] == "extractive"

    assert completion.usage is not None
    usage = (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens)
    assert usage == expected_usage(response)
    assert getattr(completion.usage, "cost_usd", None) == 0.0  # no LLM call: exactly nothing spent


async def test_a_streamed_completion_shows_each_source_then_the_answer(service: Harness) -> None:
    recorder = Recorder(service)
    async with service.openai() as client:
        stream = await client.chat.completions.create(
            model="researchcrew", messages=[user(QUESTION)], stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]

    (response,) = recorder.responses
    assert {chunk.id for chunk in chunks} == {chunks[0].id}
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    reasoning = "".join(getattr(delta, "reasoning_content", None) or "" for delta in deltas)
    assert "✓ knowledge base: 1 passage(s)" in reasoning
    assert "✗ web failed (http error): Firecrawl answered HTTP 429" in reasoning
    content = "".join(delta.content or "" for delta in deltas)
    assert "[1]." in content and "**Sources**" in content
    assert not any(
        getattr(delta, "reasoning_content", None) for delta in deltas[deltas.index(_first_content(deltas)) :]
    )

    finishing = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason == "stop"]
    assert len(finishing) == 1
    details = finishing[0].researchcrew  # type: ignore[attr-defined]
    assert details["citations"][0]["number"] == 1 and details["response_id"] == response.response_id
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert (usage_chunk.usage.prompt_tokens, usage_chunk.usage.completion_tokens, usage_chunk.usage.total_tokens) == (
        expected_usage(response)
    )


def _first_content(deltas: list[Any]) -> Any:
    return next(delta for delta in deltas if delta.content)


async def test_without_include_usage_no_usage_chunk_is_sent(service: Harness) -> None:
    async with service.openai() as client:
        stream = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)], stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_the_stream_ends_with_done_on_the_wire(service: Harness) -> None:
    async with service.http() as http:
        response = await http.post(
            "/v1/chat/completions",
            headers=service.auth("ada"),
            json={"model": "researchcrew", "messages": [user(QUESTION)], "stream": True},
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [block for block in response.text.split("\n\n") if block.strip()]
    assert blocks[-1] == "data: [DONE]"
    assert all(block.startswith("data: {") for block in blocks[:-1] if not block.startswith(":"))


@pytest.mark.parametrize("stream", [False, True])
async def test_an_llm_written_answer_reports_the_tokens_the_pipeline_counted(tmp_path: Path, stream: bool) -> None:
    llm = FakeLLM([DRAFT] * 4, model="openai/gpt-4o-mini")
    async with running_service(service_settings(tmp_path), llm=llm) as service:
        recorder = Recorder(service)
        async with service.openai() as client:
            if stream:
                chunks = [
                    chunk
                    async for chunk in await client.chat.completions.create(
                        model="researchcrew",
                        messages=[user(QUESTION)],
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                ]
                usage = chunks[-1].usage
                content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            else:
                completion = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
                usage, content = completion.usage, completion.choices[0].message.content or ""
    (response,) = recorder.responses
    assert response.answer_kind == "generated"
    assert "Metamorphic testing checks relations between outputs of related inputs [1]." in content
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == expected_usage(response)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # What the tokens cost rides along in `usage`, as OpenRouter's `cost` does (the SDK keeps unknown fields).
    assert response.cost.usd is not None and response.cost.usd > 0
    assert getattr(usage, "cost_usd", None) == pytest.approx(response.cost.usd)


# ---- conversations and sessions -------------------------------------------------------------------------------


async def test_every_turn_of_a_conversation_continues_one_session(service: Harness) -> None:
    recorder = Recorder(service)
    async with service.openai() as client:
        first = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
        answer = first.choices[0].message.content or ""
        second = await client.chat.completions.create(
            model="researchcrew",
            messages=[
                {"role": "system", "content": "You are a helpful assistant."},
                user(QUESTION),
                {"role": "assistant", "content": answer},
                user(FOLLOW_UP),
            ],
        )
        other = await client.chat.completions.create(
            model="researchcrew", messages=[user("How are flaky tests found?")]
        )

    session = first.researchcrew["session_id"]  # type: ignore[attr-defined]
    assert second.researchcrew["session_id"] == session  # type: ignore[attr-defined]
    assert second.researchcrew["session_source"] == "conversation"  # type: ignore[attr-defined]
    assert other.researchcrew["session_id"] != session  # type: ignore[attr-defined]
    assert [r.question for r in recorder.requests] == [QUESTION, FOLLOW_UP, "How are flaky tests found?"]
    assert [r.session_id for r in recorder.requests[:2]] == [session, session]

    assert await service.runtime.flush_memory()
    async with service.http() as http:
        listed = (await http.get("/v1/sessions", headers=service.auth("ada"))).json()["sessions"]
        detail = (await http.get(f"/v1/sessions/{session}", headers=service.auth("ada"))).json()
        hidden = await http.get(f"/v1/sessions/{session}", headers=service.auth("bob"))
    by_id = {s["session_id"]: s for s in listed}
    assert by_id[session]["title"] == QUESTION and by_id[session]["exchanges"] == 2
    assert [e["question"] for e in detail["exchanges"]] == [QUESTION, FOLLOW_UP]
    assert hidden.status_code == 404  # another user's conversation is not theirs to read


async def test_the_same_opening_from_another_user_or_end_user_is_another_session(service: Harness) -> None:
    async with service.openai("ada") as ada, service.openai("bob") as bob:
        plain = await ada.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
        again = await ada.chat.completions.create(model="researchcrew", messages=[user(f"  {QUESTION}\n")])
        end_user = await ada.chat.completions.create(model="researchcrew", messages=[user(QUESTION)], user="carol")
        other_key = await bob.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
    sessions = [c.researchcrew["session_id"] for c in (plain, again, end_user, other_key)]  # type: ignore[attr-defined]
    assert sessions[0] == sessions[1]  # whitespace does not make a new conversation
    assert len(set(sessions[1:])) == 3


async def test_metadata_or_the_open_webui_chat_id_picks_the_session(service: Harness) -> None:
    recorder = Recorder(service)
    async with service.http() as http:
        made = (await http.post("/v1/sessions", headers=service.auth("ada"), json={"title": "Reading list"})).json()
    async with service.openai() as client:
        by_metadata = await client.chat.completions.create(
            model="researchcrew", messages=[user(QUESTION)], metadata={"session_id": made["session_id"]}
        )
        new_by_metadata = await client.chat.completions.create(
            model="researchcrew", messages=[user(QUESTION)], metadata={"session_id": "notebook-7"}
        )
        by_header = await client.chat.completions.create(
            model="researchcrew",
            messages=[user(QUESTION)],
            extra_headers={"X-OpenWebUI-Chat-Id": "0b6d6c1e-52f4-4c2b-9a53-5a4e0b7f1c11"},
        )
    assert by_metadata.researchcrew["session_id"] == made["session_id"]  # type: ignore[attr-defined]
    assert by_metadata.researchcrew["session_source"] == "metadata"  # type: ignore[attr-defined]
    assert new_by_metadata.researchcrew["session_id"] == "notebook-7"  # type: ignore[attr-defined]
    assert by_header.researchcrew["session_id"] == "0b6d6c1e-52f4-4c2b-9a53-5a4e0b7f1c11"  # type: ignore[attr-defined]
    assert by_header.researchcrew["session_source"] == "header"  # type: ignore[attr-defined]
    assert [r.session_id for r in recorder.requests] == [
        made["session_id"],
        "notebook-7",
        "0b6d6c1e-52f4-4c2b-9a53-5a4e0b7f1c11",
    ]
    async with service.http() as http:
        titles = {
            s["session_id"]: s["title"]
            for s in (await http.get("/v1/sessions", headers=service.auth("ada"))).json()["sessions"]
        }
    assert titles[made["session_id"]] == "Reading list"  # a session's own title is kept
    assert titles["notebook-7"] == QUESTION


async def test_the_research_request_carries_the_model_style_max_tokens_and_researchcrew_options(
    service: Harness,
) -> None:
    recorder = Recorder(service)
    async with service.openai() as client:
        await client.chat.completions.create(
            model="researchcrew-concise",
            messages=[user([{"type": "text", "text": "What is"}, {"type": "text", "text": "metamorphic testing?"}])],  # type: ignore[arg-type]
            max_tokens=100,
            temperature=0.2,
            extra_body={"researchcrew": {"exclude_sources": ["web"], "deadline_s": 20}},
        )
        await client.chat.completions.create(
            model="researchcrew-concise",
            messages=[user(QUESTION)],
            extra_body={"researchcrew": {"response": {"response_format": "technical"}}},
        )
    first, second = recorder.requests
    assert first.question == "What is\n\nmetamorphic testing?"
    assert first.response.response_format == "concise"
    assert (first.response.max_response_length, first.response.min_response_length) == (75, 75)
    assert first.exclude_sources == ["web"] and first.deadline_s == 20
    web = {r.source_type: r for r in recorder.responses[0].source_reports}["web"]
    assert web.status == "skipped"
    assert second.response.response_format == "technical"  # researchcrew's own option wins over the model's


# ---- failures, as the SDK's exceptions -------------------------------------------------------------------------


async def test_a_missing_or_wrong_key_is_an_authentication_error(service: Harness) -> None:
    async with service.openai("nobody") as client:
        with pytest.raises(openai.AuthenticationError) as missing:
            await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
    assert missing.value.status_code == 401
    assert "not valid" in missing.value.message
    body = missing.value.body
    assert isinstance(body, dict) and body["type"] == "authentication_error"
    assert missing.value.response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("request_fields", "param", "words"),
    [
        ({"model": "gpt-4o"}, "model", "does not exist"),
        ({"messages": [user(QUESTION), {"role": "assistant", "content": "Sure"}]}, "messages.1.role", "last message"),
        ({"messages": [user("   ")]}, "messages.0.content", "empty"),
        (
            {"messages": [user([{"type": "image_url", "image_url": {"url": "https://x/y.png"}}])]},  # type: ignore[list-item]
            "messages.0.content",
            "text only",
        ),
        ({"n": 2}, "n", "one answer"),
        ({"logprobs": True}, "logprobs", "log probabilities"),
        ({"response_format": {"type": "json_object"}}, "response_format", "Markdown"),
        ({"tool_choice": "required", "tools": []}, "tool_choice", "never calls"),
        ({"temperature": 5}, "temperature", "less than or equal to 2"),
        ({"metadata": {"session_id": "../etc"}}, "metadata.session_id", "letters, digits"),
        ({"extra_body": {"frobnicate": True}}, "frobnicate", "Unrecognized request argument"),
        (
            {"extra_body": {"researchcrew": {"response": {"max_response_length": 60, "min_response_length": 90}}}},
            "researchcrew.response.min_response_length",
            "larger than",
        ),
    ],
)
async def test_bad_requests_name_the_parameter(
    service: Harness, request_fields: dict[str, Any], param: str, words: str
) -> None:
    arguments: dict[str, Any] = {"model": "researchcrew", "messages": [user(QUESTION)], **request_fields}
    async with service.openai() as client:
        with pytest.raises((openai.BadRequestError, openai.NotFoundError)) as raised:
            await client.chat.completions.create(**arguments)
    error = raised.value
    assert isinstance(error, openai.APIStatusError)
    assert words in error.message
    assert isinstance(error.body, dict) and error.body["param"] == param
    assert error.body["type"] == "invalid_request_error"


async def test_models_lists_the_answer_styles(service: Harness) -> None:
    async with service.openai() as client:
        models = [model.id async for model in client.models.list()]
        one = await client.models.retrieve("researchcrew-technical")
        with pytest.raises(openai.NotFoundError) as missing:
            await client.models.retrieve("gpt-4o")
    assert models == ["researchcrew", "researchcrew-concise", "researchcrew-detailed", "researchcrew-technical"]
    assert one.id == "researchcrew-technical" and one.owned_by == "researchcrew"
    assert isinstance(missing.value.body, dict) and missing.value.body["code"] == "model_not_found"


async def test_the_rate_limit_is_a_rate_limit_error_with_retry_after(tmp_path: Path) -> None:
    settings = service_settings(tmp_path, rate_limit="2/minute")
    async with running_service(settings) as service, service.openai() as client:
        await client.models.list()
        await client.models.list()
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert isinstance(limited.value.body, dict) and limited.value.body["code"] == "rate_limited"


async def test_a_store_failure_is_a_server_error_in_both_modes(service: Harness) -> None:
    async def broken(request: ResearchRequest, **options: Any) -> FinalResponse:
        raise MemoryStoreError("database is locked")

    service.runtime.ask = broken  # type: ignore[method-assign]
    async with service.openai() as client:
        with pytest.raises(openai.InternalServerError) as plain:
            await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)])
        stream = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)], stream=True)
        with pytest.raises(openai.APIError) as streamed:
            async for _ in stream:
                pass
    assert plain.value.status_code == 503 and "memory store is not reachable" in plain.value.message
    assert "memory store is not reachable" in streamed.value.message


async def test_a_bug_mid_stream_is_reported_not_a_silent_hang_up(service: Harness) -> None:
    async def buggy(request: ResearchRequest, **options: Any) -> FinalResponse:
        raise ZeroDivisionError("a bug")

    service.runtime.ask = buggy  # type: ignore[method-assign]
    async with service.openai() as client:
        stream = await client.chat.completions.create(model="researchcrew", messages=[user(QUESTION)], stream=True)
        with pytest.raises(openai.APIError) as raised:
            async for _ in stream:
                pass
    assert "failed unexpectedly" in raised.value.message and "a bug" not in raised.value.message


async def test_closing_a_stream_cancels_the_question_and_frees_its_slot(tmp_path: Path) -> None:
    hanging = FakeTool("rag", hang=True)
    talker = FakeTool("web", chunks=[fake_chunk("web", 1, content=EVIDENCE)])
    # Sources get 60 s each, so only the hang-up can stop the hanging one within the test's few seconds.
    settings = Settings(data_dir=tmp_path, retrieval=RetrievalSettings(timeout_per_source_s=60))
    async with running_service(settings, tools=[hanging, talker]) as service:
        with live_server(service.app) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                body = {"model": "researchcrew", "messages": [user(QUESTION)], "stream": True}
                async with http.stream("POST", "/v1/chat/completions", headers=service.auth("ada"), json=body) as r:
                    async for line in r.aiter_lines():
                        if "reasoning_content" in line and "web" in line:
                            break  # one source has answered; the other still searches: hang up now
            for _ in range(60):
                if hanging.cancelled and _running(service) == 0:
                    break
                await asyncio.sleep(0.05)
            running = _running(service)
    assert hanging.cancelled
    assert running == 0


def _running(service: Harness) -> int:
    """Questions of ada running in the server (the live server's state: its lifespan made it)."""
    return int(service.app.state.service.throttle.running("ada"))


async def test_the_openapi_schema_documents_the_routes(service: Harness) -> None:
    async with service.http() as http:
        schema = (await http.get("/openapi.json")).json()
    assert "/v1/chat/completions" in schema["paths"] and "/v1/models" in schema["paths"]
    operation = schema["paths"]["/v1/chat/completions"]["post"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]


@pytest.mark.parametrize("body", [b"\x03\x97\xff", b"{not json", b"[1, 2]"])
async def test_an_unreadable_body_is_an_openai_error(service: Harness, body: bytes) -> None:
    async with service.http() as http:
        response = await http.post(
            "/v1/chat/completions",
            headers={**service.auth("ada"), "Content-Type": "application/json"},
            content=body,
        )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
