"""crewAI's real ``LLM`` class, end to end, against a loopback OpenAI-compatible server: the request it sends,
the validated answer it yields, and every fault degrading to a labelled extractive answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from researchcrew.contracts.synthesizer import SynthesizerOutput
from researchcrew.llm import build_llm
from researchcrew.pipeline.synthesize._llm_writer import Synthesizer
from researchcrew.settings import LLMSettings
from tests.loopback.openai import OpenAIChatService, Scripted, error_reply, openai_server
from tests.loopback.server import LoopbackServer, Reply, closed_port
from tests.synthesizer.builders import GOOD_REPLY, draft_json, evidence, request, section

API_KEY = "sk-test-0123456789"


def settings_for(base_url: str, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "model": "openai/test-model",
        "base_url": base_url,
        "api_key": SecretStr(API_KEY),
        "temperature": 0.2,
        "timeout_s": 5.0,
        "max_retries": 0,
    }
    return LLMSettings(**{**values, **overrides})


@pytest.fixture
def served() -> Iterator[Any]:
    """Start a scripted server on demand: ``served(replies) -> (server, service)``."""
    stack: list[Any] = []

    def start(replies: list[Scripted]) -> tuple[LoopbackServer, OpenAIChatService]:
        context = openai_server(replies, api_key=API_KEY)
        stack.append(context)
        return context.__enter__()

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


async def answer(base_url: str, **overrides: Any) -> SynthesizerOutput:
    llm = build_llm(settings_for(base_url, **overrides))
    return await Synthesizer(llm, timeout_s=overrides.pop("agent_timeout_s", 20.0)).run(request(evidence(3)))


async def test_request_body_and_validated_answer(served: Any) -> None:
    reply = draft_json(
        section("Boiling point", ("Water boils at 100 degrees Celsius at sea level.", [1]), ("Invented.", [9])),
    )
    server, service = served([reply])
    output = await answer(f"{server.url}/v1")

    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == f"Bearer {API_KEY}"
    body = service.bodies[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("You are Research synthesizer. You write answers")
    user = body["messages"][1]["content"]
    assert "<<<EVIDENCE 1>>>" in user and "<<<END EVIDENCE 3>>>" in user and "<<<EVIDENCE 4>>>" not in user
    schema = body["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["name"] == "AnswerDraft"
    assert schema["json_schema"]["strict"] is True
    assert not body.get("stream")

    response = output.final_response
    assert response.answer_kind == "generated"
    assert [(c.text, c.citations) for s in response.sections for c in s.claims] == [
        ("Water boils at 100 degrees Celsius at sea level.", [1])
    ]
    assert response.citations[0].chunk_id == "chunk-1"
    assert response.citation_stats.removed == 1 and response.citation_stats.claims_removed == 1
    assert response.answer == "## Boiling point\n\nWater boils at 100 degrees Celsius at sea level [1]."


async def test_prose_around_the_json_is_recovered_from_the_providers_parse_error(served: Any) -> None:
    server, _ = served([f"Here is the answer:\n```json\n{GOOD_REPLY}\n```"])
    output = await answer(f"{server.url}/v1")
    assert output.final_response.answer_kind == "generated"
    assert len(server.requests) == 1, "readable without a repair call"


async def test_an_unreadable_reply_gets_one_repair_request(served: Any) -> None:
    server, service = served(["I think water boils at 100 °C.", GOOD_REPLY])
    output = await answer(f"{server.url}/v1")
    assert output.final_response.answer_kind == "generated"
    assert len(service.bodies) == 2
    repair = service.bodies[1]
    assert (
        "<<<PREVIOUS REPLY>>>\nI think water boils at 100 °C.\n<<<END PREVIOUS REPLY>>>"
        in repair["messages"][1]["content"]
    )
    assert repair["response_format"]["json_schema"]["name"] == "AnswerDraft"


async def test_without_structured_output_no_response_format_is_sent(served: Any) -> None:
    server, service = served([GOOD_REPLY])
    llm = build_llm(settings_for(f"{server.url}/v1", structured_output=False))
    output = await Synthesizer(llm, structured_output=False).run(request(evidence(3)))
    assert output.final_response.answer_kind == "generated"
    assert "response_format" not in service.bodies[0]


@pytest.mark.parametrize(
    ("fault", "in_caveat"),
    [
        (
            error_reply(500, "The server had an error while processing your request.", type_="server_error", code=None),
            "500",
        ),
        (error_reply(400, "Invalid schema for response_format", type_="invalid_request_error", code=None), "400"),
        (Reply.text("<html>Bad gateway</html>", status=200, content_type="application/json"), "failed"),
        (Reply(drop_connection=True), "failed"),
    ],
    ids=["http-500", "http-400", "malformed-body", "dropped-connection"],
)
async def test_faults_degrade_to_a_labelled_extractive_answer(served: Any, fault: Reply, in_caveat: str) -> None:
    server, _ = served([fault])
    output = await answer(f"{server.url}/v1")
    response = output.final_response
    assert response.answer_kind == "extractive" and response.citations
    assert any("could not be used" in c and in_caveat in c for c in response.caveats), response.caveats
    assert len(server.requests) == 1, "max_retries=0: exactly one attempt"


async def test_the_sdk_retries_a_500_once_when_configured(served: Any) -> None:
    failure = error_reply(500, "temporary", type_="server_error", code=None)
    server, _ = served([failure, GOOD_REPLY])
    output = await answer(f"{server.url}/v1", max_retries=1)
    assert output.final_response.answer_kind == "generated"
    assert len(server.requests) == 2


async def test_a_rate_limit_degrades_to_an_extractive_answer(served: Any) -> None:
    limited = error_reply(429, "Rate limit reached for requests", type_="requests", code="rate_limit_exceeded")
    server, _ = served([limited] * 5)
    output = await answer(f"{server.url}/v1")
    assert output.final_response.answer_kind == "extractive"
    assert any("429" in caveat for caveat in output.final_response.caveats)
    assert 1 <= len(server.requests) <= 3, "crewAI retries rate limits at most three times"


async def test_a_hung_server_is_cut_off_by_the_client_timeout(served: Any) -> None:
    server, _ = served([Reply.json({}, delay_s=30)])
    started = time.monotonic()
    output = await answer(f"{server.url}/v1", timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert output.final_response.answer_kind == "extractive"
    assert any("timed out" in caveat.lower() for caveat in output.final_response.caveats)


async def test_connection_refused_degrades_to_an_extractive_answer() -> None:
    output = await answer(f"http://127.0.0.1:{closed_port()}/v1")
    assert output.final_response.answer_kind == "extractive"
    assert any("connect" in caveat.lower() for caveat in output.final_response.caveats)


async def test_a_failing_provider_prints_nothing_to_the_console(
    served: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # on a failed call crewAI's event bus prints "[CrewAIEventsBus] Warning: ..." straight to the console
    server, _ = served([error_reply(500, "boom", type_="server_error", code=None)])
    output = await answer(f"{server.url}/v1")
    assert output.final_response.answer_kind == "extractive"
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
