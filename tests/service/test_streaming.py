"""Server-sent events: each stage, each source as it answers or fails, the answer text as it is written, then the
answer and `done` — the same ProgressEvents the SDK's stream() yields."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.contracts import FinalResponse, ProgressEvent
from researchcrew.contracts.request import ResearchRequest
from researchcrew.errors import ToolError
from researchcrew.runtime import open_runtime
from researchcrew.settings import Settings
from researchcrew.testing import FakeLLM, FakeTool, fake_chunk
from tests.service.support import EVIDENCE, QUESTION, ServiceHarness, running_service, service_settings

STREAM = {"Accept": "text/event-stream"}


def parse_events(raw: str) -> list[tuple[str, Any]]:
    """(event name, JSON data) of each server-sent event, in order; comments are skipped."""
    events = []
    for block in raw.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        events.append((fields["event"], json.loads(fields["data"])))
    return events


class FailingTool(FakeTool):
    async def _behave(self) -> None:
        await asyncio.sleep(0.05)
        raise ToolError("http_error", "Firecrawl answered HTTP 429: rate limited", status_code=429)


def sources() -> list[FakeTool]:
    return [
        FakeTool("rag", chunks=[fake_chunk("rag", 1, content=EVIDENCE, semantic_relevance=0.9)], delay_s=0.1),
        FailingTool("web"),
        FakeTool("arxiv", chunks=[]),
    ]


async def ask_streaming(service: ServiceHarness, client: httpx.AsyncClient, **body: Any) -> list[tuple[str, Any]]:
    session_id = (await client.post("/v1/sessions", headers=service.auth("ada"))).json()["session_id"]
    response = await client.post(
        f"/v1/sessions/{session_id}/messages",
        headers={**service.auth("ada"), **STREAM},
        json={"question": QUESTION, **body},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_events(response.text)


async def test_the_stream_shows_stages_each_source_the_text_then_the_answer(tmp_path: Path) -> None:
    async with running_service(service_settings(tmp_path), tools=sources()) as service, service.client() as client:
        events = await ask_streaming(service, client)

    names = [name for name, _ in events]
    assert names[-2:] == ["response", "done"]
    progress = [ProgressEvent.model_validate(data) for name, data in events[:-2]]  # the SDK's own model
    assert all(event.kind == name for event, name in zip(progress, names, strict=False))

    stages = [(e.stage, e.status) for e in progress if e.kind == "stage"]
    assert stages[0] == ("guard", "started") and stages[-1] == ("respond", "finished")
    started = [stage for stage, status in stages if status == "started"]
    assert started == [stage for stage, status in stages if status == "finished"]  # every stage ends

    reports = {e.source.source_type: e.source for e in progress if e.source is not None}
    assert set(reports) == {"rag", "web", "arxiv"}
    assert reports["rag"].status == "success" and reports["rag"].chunk_count == 1
    assert reports["arxiv"].status == "empty"
    assert reports["web"].status == "failed" and reports["web"].failure is not None
    assert reports["web"].failure.kind == "http_error" and "429" in reports["web"].failure.message
    # each source is reported as it answers, inside the retrieve stage: the quick failures before the slow source
    order = [e.source.source_type for e in progress if e.source is not None]
    assert order.index("web") < order.index("rag") and order.index("arxiv") < order.index("rag")
    retrieve_end = next(i for i, e in enumerate(progress) if (e.stage, e.status) == ("retrieve", "finished"))
    assert all(i < retrieve_end for i, e in enumerate(progress) if e.kind == "source")

    texts = [e for e in progress if e.kind == "text"]
    assert len(texts) >= 2 and all(e.detail["mode"] == "section" for e in texts)
    answer = FinalResponse.model_validate(events[-2][1])
    assert "".join(e.text or "" for e in texts) == answer.answer  # section by section, the whole answer
    assert [r.source_type for r in answer.source_reports] == ["rag", "web", "arxiv"]


async def test_event_ids_increase_and_the_final_answer_is_remembered(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    session_id = (await client.post("/v1/sessions", headers=service.auth("ada"))).json()["session_id"]
    response = await client.post(
        f"/v1/sessions/{session_id}/messages", headers={**service.auth("ada"), **STREAM}, json={"question": QUESTION}
    )
    ids = [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]
    assert ids == list(range(1, len(ids) + 1))
    answer = parse_events(response.text)[-2][1]
    assert await service.runtime.flush_memory(timeout_s=60)
    read = (await client.get(f"/v1/sessions/{session_id}", headers=service.auth("ada"))).json()
    assert [e["response_id"] for e in read["exchanges"]] == [answer["response_id"]]


DRAFT = (
    '{"sections": [{"heading": "What it is", "perspective": null, "claims": ['
    '{"text": "Metamorphic testing checks relations between outputs of related inputs.", "citations": [1]}, '
    '{"text": "It addresses the oracle problem.", "citations": [1]}]}]}'
)


async def test_a_streaming_llm_answer_arrives_token_by_token(tmp_path: Path) -> None:
    llm = FakeLLM([DRAFT])
    settings = service_settings(tmp_path)
    async with running_service(settings, llm=llm) as service, service.client() as client:
        events = await ask_streaming(service, client)
    texts = [ProgressEvent.model_validate(data) for name, data in events if name == "text"]
    assert len(texts) > 10 and all(e.detail == {"mode": "token", "writer": "llm", "reset": False} for e in texts)
    streamed = "".join(e.text or "" for e in texts)
    assert streamed == (
        "## What it is\n\nMetamorphic testing checks relations between outputs of related inputs. "
        "It addresses the oracle problem."
    )
    answer = FinalResponse.model_validate(events[-2][1])
    assert answer.answer_kind == "generated"
    assert "Metamorphic testing checks relations between outputs of related inputs [1]." in answer.answer


async def test_plain_answers_do_not_stream_the_llm(tmp_path: Path) -> None:
    llm = FakeLLM([DRAFT])
    async with open_runtime(Settings(data_dir=tmp_path), tools=sources(), llm=llm, remember=False) as runtime:
        from crewai.events.event_bus import crewai_event_bus
        from crewai.events.types.llm_events import LLMStreamChunkEvent

        chunks: list[str] = []
        with crewai_event_bus.scoped_handlers():
            crewai_event_bus.on(LLMStreamChunkEvent)(lambda _source, event: chunks.append(event.chunk))
            answer = await runtime.ask(ResearchRequest(question=QUESTION))
        assert answer.answer_kind == "generated" and chunks == []


async def test_when_the_llm_fails_the_extractive_answer_starts_over(tmp_path: Path) -> None:
    uncited = '{"sections": [{"heading": "Half", "claims": [{"text": "Nothing cited here.", "citations": [9]}]}]}'
    llm = FakeLLM([uncited])
    async with running_service(service_settings(tmp_path), llm=llm) as service, service.client() as client:
        events = await ask_streaming(service, client)
    texts = [ProgressEvent.model_validate(data) for name, data in events if name == "text"]
    writers = [e.detail["writer"] for e in texts]
    assert writers[0] == "llm" and writers[-1] == "extractive"
    first_extractive = writers.index("extractive")
    assert texts[first_extractive].detail["reset"] is True
    answer = FinalResponse.model_validate(events[-2][1])
    assert answer.answer_kind == "extractive"
    assert "".join(e.text or "" for e in texts[first_extractive:]) == answer.answer


async def test_the_sdk_stream_yields_the_same_events(tmp_path: Path) -> None:
    from researchcrew import ResearchAssistant

    async with ResearchAssistant(Settings(data_dir=tmp_path), tools=sources(), remember=False) as assistant:
        items = [item async for item in assistant.stream(QUESTION)]
    assert isinstance(items[-1], FinalResponse)
    kinds = {item.kind for item in items[:-1] if isinstance(item, ProgressEvent)}
    assert kinds == {"stage", "source", "text"}


@pytest.mark.parametrize("payload", [{"source": None, "text": "x"}, {"status": "source"}, {"status": "text"}])
def test_a_progress_event_carries_exactly_its_payload(payload: dict[str, Any]) -> None:
    base = {"run_id": "r", "stage": "retrieve", "status": "started", "elapsed_ms": 1.0}
    with pytest.raises(ValueError, match="set exactly on"):
        ProgressEvent.model_validate({**base, **payload})
