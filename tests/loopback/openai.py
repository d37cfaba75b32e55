"""An OpenAI-compatible chat-completions service on ``LoopbackServer`` (what Ollama, vLLM and OpenAI speak).

Only ``POST /v1/chat/completions``, non-streaming. Replies are scripted: a string becomes a chat completion whose
message content is that string, shaped like a response recorded from the real API (id, created, model echoed
from the request, ``choices[0].message`` with ``refusal``/``annotations``, ``usage`` with token details,
``service_tier``, ``system_fingerprint``); a ``Reply`` is sent as is (faults: 429, 500, malformed body, delay,
dropped connection); a callable gets the parsed request body and returns either. When the script runs out the
service answers 500, so an unexpected extra call fails the test instead of passing silently.

    with openai_server(['{"sections": []}']) as (server, service):
        llm = build_llm(LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key="sk-test"))
        ...
        assert service.bodies[0]["model"] == "test-model"
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.loopback.server import LoopbackServer, Reply, Request

CHAT_PATH = "/v1/chat/completions"
Scripted = str | Reply | Callable[[dict[str, Any]], "str | Reply"]


def chat_completion(content: str, *, model: str, number: int = 1, prompt_tokens: int = 412) -> dict[str, Any]:
    """A non-streaming chat completion in the shape the OpenAI API returns (recorded 2024-12, gpt-4o-mini)."""
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"chatcmpl-AZvnAqepiNWh0HdS4B023X7hp{number:05d}",
        "object": "chat.completion",
        "created": 1733126996 + number,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_0705bf87c0",
    }


def error_reply(status: int, message: str, *, type_: str, code: str | None, **kwargs: Any) -> Reply:
    """An error in the OpenAI API's shape, e.g. ``error_reply(429, "Rate limit reached", type_="requests",
    code="rate_limit_exceeded")``."""
    return Reply.json({"error": {"message": message, "type": type_, "param": None, "code": code}}, status, **kwargs)


class OpenAIChatService:
    """The route: scripted replies to ``POST /v1/chat/completions`` and the parsed request bodies, in order."""

    def __init__(self, replies: list[Scripted], *, api_key: str | None = None) -> None:
        self._replies: deque[Scripted] = deque(replies)
        self._lock = threading.Lock()
        self.api_key = api_key
        self.bodies: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        return len(self._replies)

    def __call__(self, request: Request) -> Reply:
        if request.method != "POST" or request.path != CHAT_PATH:
            message = f"Unknown request URL: {request.method} {request.path}"
            return error_reply(404, message, type_="invalid_request_error", code="unknown_url")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return error_reply(
                401, "Incorrect API key provided.", type_="invalid_request_error", code="invalid_api_key"
            )
        try:
            body = request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_reply(
                400, "We could not parse the JSON body of your request.", type_="invalid_request_error", code=None
            )
        if body.get("stream"):
            return error_reply(
                400, "This fake serves non-streaming requests only.", type_="invalid_request_error", code=None
            )
        with self._lock:
            self.bodies.append(body)
            number = len(self.bodies)
            scripted = self._replies.popleft() if self._replies else None
        if scripted is None:
            return error_reply(500, f"no scripted reply left for request #{number}", type_="server_error", code=None)
        if callable(scripted) and not isinstance(scripted, Reply):
            scripted = scripted(body)
        if isinstance(scripted, Reply):
            return scripted
        return Reply.json(chat_completion(scripted, model=str(body.get("model", "")), number=number))


@contextmanager
def openai_server(
    replies: list[Scripted], *, api_key: str | None = None
) -> Iterator[tuple[LoopbackServer, OpenAIChatService]]:
    """A running OpenAI-compatible server with ``replies`` scripted; base URL for SDKs: ``server.url + "/v1"``."""
    service = OpenAIChatService(replies, api_key=api_key)
    with LoopbackServer(service) as server:
        yield server, service
