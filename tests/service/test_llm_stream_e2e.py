"""Token-by-token text from crewAI's real OpenAI provider: the service's event stream asks the provider (the
``openai`` SDK) to stream, on loopback, and each streamed delta becomes text as it arrives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from researchcrew.contracts import FinalResponse, ProgressEvent
from researchcrew.settings import LLMSettings, ServiceSettings, Settings
from tests.loopback.openai import CHAT_PATH, chat_completion
from tests.loopback.server import LoopbackServer, Reply, Request
from tests.service.support import QUESTION, running_service
from tests.service.test_streaming import DRAFT, ask_streaming


class StreamingChat:
    """``POST /v1/chat/completions``: with ``stream: true`` the reply as chat.completion.chunk events, a few
    characters each, then a usage chunk and ``[DONE]`` (the shape OpenAI streams); without, one completion.
    Records request bodies."""

    def __init__(self, content: str, piece: int = 7) -> None:
        self.content = content
        self.piece = piece
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Request) -> Reply:
        assert request.path == CHAT_PATH
        body = request.json()
        self.bodies.append(body)
        if not body.get("stream"):
            return Reply.json(chat_completion(self.content, model=str(body.get("model", ""))))
        base = {"id": "chatcmpl-stream1", "object": "chat.completion.chunk", "created": 1733126996}
        base["model"] = body.get("model", "")
        pieces = [self.content[i : i + self.piece] for i in range(0, len(self.content), self.piece)]
        events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        events += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        usage = {"prompt_tokens": 400, "completion_tokens": len(pieces), "total_tokens": 400 + len(pieces)}
        events.append({**base, "choices": [], "usage": usage})
        stream = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        return Reply.text(stream, content_type="text/event-stream")


async def test_the_real_openai_provider_streams_when_someone_watches(tmp_path: Path) -> None:
    chat = StreamingChat(DRAFT)
    with LoopbackServer(chat) as server:
        llm = LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key="sk-test")
        settings = Settings(data_dir=tmp_path, llm=llm, service=ServiceSettings())
        async with running_service(settings, remember=False) as service, service.client() as client:
            events = await ask_streaming(service, client)

    (body,) = chat.bodies
    assert body["stream"] is True  # streaming was asked for this watched call only
    texts = [ProgressEvent.model_validate(data) for name, data in events if name == "text"]
    assert len(texts) > 5 and {e.detail["writer"] for e in texts} == {"llm"}
    assert "".join(e.text or "" for e in texts) == (
        "## What it is\n\nMetamorphic testing checks relations between outputs of related inputs. "
        "It addresses the oracle problem."
    )
    answer = FinalResponse.model_validate(events[-2][1])
    assert answer.answer_kind == "generated"


async def test_a_plain_answer_does_not_ask_the_provider_to_stream(tmp_path: Path) -> None:
    chat = StreamingChat(DRAFT)
    with LoopbackServer(chat) as server:
        llm = LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key="sk-test")
        settings = Settings(data_dir=tmp_path, llm=llm, service=ServiceSettings())
        async with running_service(settings, remember=False) as service, service.client() as client:
            session_id = (await client.post("/v1/sessions", headers=service.auth("ada"))).json()["session_id"]
            response = await client.post(
                f"/v1/sessions/{session_id}/messages", headers=service.auth("ada"), json={"question": QUESTION}
            )
    (body,) = chat.bodies
    assert not body.get("stream")
    assert response.json()["answer_kind"] == "generated"
