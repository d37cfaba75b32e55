"""The bodies of the OpenAI-compatible routes, in the shape of OpenAI's Chat Completions and Models APIs.

The request model names every parameter of OpenAI's ``POST /v1/chat/completions`` (so a client that works against
OpenAI works here) and rejects any other, as OpenAI does, with an error naming it. Parameters that steer sampling
(``temperature``, ``top_p``, ``seed``, penalties, ``stop``) are accepted and have no effect: an answer is researched
and cited, not sampled. Parameters that ask for something researchcrew cannot give (``n`` > 1, ``logprobs``, forced
tool calls, JSON output, audio) are refused by the route with a 400 naming the parameter.

Messages are lenient where clients differ: a message may carry fields of its client's own (some echo
``reasoning_content`` back); only ``role`` and ``content`` are read. Content parts other than text are refused in the
question and ignored in earlier turns.

``researchcrew`` is this service's own extension (``extra_body={"researchcrew": {...}}`` in the OpenAI SDK): the
routing and answer options of the native ``/v1/sessions/{id}/messages`` route.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from researchcrew.contracts._base import RequestContract, SourceType, StorableInput
from researchcrew.contracts.chunks import SourceReport
from researchcrew.contracts.request import MAX_DEADLINE_S, ResponseOptions, ToolOptions
from researchcrew.contracts.synthesizer import AnswerKind, Citation, ConfidenceLevel

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ContentPart(StorableInput):
    """One part of a message's content. Only ``text`` parts are read; the other kinds' fields vary by kind."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=64, description="`text`, or another kind (`image_url`, `input_audio`, `file`, ...).")
    text: str | None = Field(default=None, description="The text of a `text` part.")


class ChatMessage(StorableInput):
    """One message of the conversation. Fields a client adds of its own are ignored."""

    model_config = ConfigDict(extra="ignore")

    role: Role = Field(description="Who wrote it. The last `user` message is the question.")
    content: str | list[ContentPart] | None = Field(
        default=None, description="The text, or a list of content parts (only `text` parts are read)."
    )
    name: str | None = Field(default=None, max_length=256, description="An optional name of the participant.")


class StreamOptions(RequestContract):
    include_usage: StrictBool = Field(
        default=False, description="Send a last chunk, before `[DONE]`, whose `usage` counts the whole request."
    )
    include_obfuscation: StrictBool | None = Field(default=None, description="Accepted; has no effect.")


class ResearchOptions(RequestContract):
    """researchcrew's own options for this question (the native messages route's options)."""

    preferred_sources: list[SourceType] | None = Field(
        default=None, description="Source types to put first, in order (rag, web, arxiv, memory)."
    )
    exclude_sources: list[SourceType] | None = Field(default=None, description="Source types not to search.")
    tool_options: ToolOptions = Field(
        default_factory=dict,
        description='Options for one source\'s tool, by source type, e.g. {"web": {"domains": ["arxiv.org"]}}.',
    )
    deadline_s: float | None = Field(
        default=None, gt=0, le=MAX_DEADLINE_S, description="Seconds for the whole run (default: the server's)."
    )
    response: ResponseOptions = Field(
        default_factory=ResponseOptions,
        description="How the answer should be written; `response_format` here wins over the model's.",
    )


_NO_EFFECT = "Accepted for compatibility; has no effect (answers are researched and cited, not sampled)."


class ChatCompletionRequest(RequestContract):
    """``POST /v1/chat/completions``: the conversation so far; the last user message is the question."""

    model: str = Field(min_length=1, max_length=256, description="A model id from `GET /v1/models`.")
    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=10_000,
        description="The conversation, oldest first. The last message must be the user's question; the first "
        "user message names the conversation (see the `session` field of the answer).",
    )
    stream: StrictBool | None = Field(default=False, description="Answer as server-sent chunks, ending with `[DONE]`.")
    stream_options: StreamOptions | None = Field(default=None, description="Options of a streamed answer.")
    metadata: dict[str, str] | None = Field(
        default=None,
        max_length=16,
        description="Up to 16 string pairs. `session_id` picks the researchcrew session explicitly (made on first "
        "use); other keys are ignored.",
    )
    user: str | None = Field(
        default=None,
        max_length=256,
        description="The end user of a front-end that shares one key among its users: conversations of different "
        "end users never share a session.",
    )
    safety_identifier: str | None = Field(default=None, max_length=256, description="Treated like `user`.")
    max_tokens: int | None = Field(
        default=None, ge=1, description="Bounds the answer's length (about 0.75 words per token); never cuts it."
    )
    max_completion_tokens: int | None = Field(default=None, ge=1, description="Same as `max_tokens`.")
    n: int | None = Field(default=None, ge=1, le=128, description="Must be 1: one answer is researched per request.")
    response_format: dict[str, Any] | None = Field(
        default=None, description='Only {"type": "text"}: the answer is Markdown with numbered citations.'
    )
    logprobs: StrictBool | None = Field(default=None, description="Must be false: researched answers have no logprobs.")
    top_logprobs: int | None = Field(default=None, ge=0, le=20, description="Must be 0 or absent.")
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Accepted; researchcrew never calls a client's tools (tool_choice must allow that)."
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description="`none` or `auto` (no tool is called); `required` or a named tool is refused."
    )
    parallel_tool_calls: StrictBool | None = Field(default=None, description="Accepted; no tool is called.")
    functions: list[dict[str, Any]] | None = Field(default=None, description="Deprecated `tools`; accepted.")
    function_call: str | dict[str, Any] | None = Field(default=None, description="Deprecated `tool_choice`.")
    modalities: list[str] | None = Field(default=None, description='Only ["text"].')
    audio: dict[str, Any] | None = Field(default=None, description="Refused: answers are text.")
    temperature: float | None = Field(default=None, ge=0, le=2, description=_NO_EFFECT)
    top_p: float | None = Field(default=None, ge=0, le=1, description=_NO_EFFECT)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, description=_NO_EFFECT)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, description=_NO_EFFECT)
    seed: int | None = Field(default=None, description=_NO_EFFECT)
    stop: str | list[str] | None = Field(default=None, description=_NO_EFFECT)
    logit_bias: dict[str, float] | None = Field(default=None, description=_NO_EFFECT)
    reasoning_effort: str | None = Field(default=None, max_length=32, description=_NO_EFFECT)
    verbosity: str | None = Field(
        default=None, max_length=32, description="Accepted; choose a `researchcrew-concise` model instead."
    )
    store: StrictBool | None = Field(default=None, description="Accepted; every exchange is remembered in its session.")
    service_tier: str | None = Field(default=None, max_length=32, description="Accepted; has no effect.")
    prediction: dict[str, Any] | None = Field(default=None, description="Accepted; has no effect.")
    prompt_cache_key: str | None = Field(default=None, max_length=1024, description="Accepted; has no effect.")
    prompt_cache_retention: str | None = Field(default=None, max_length=32, description="Accepted; has no effect.")
    prompt_cache_options: dict[str, Any] | None = Field(default=None, description="Accepted; has no effect.")
    moderation: dict[str, Any] | None = Field(default=None, description="Accepted; has no effect.")
    web_search_options: dict[str, Any] | None = Field(
        default=None, description="Accepted; web search is one of researchcrew's sources (see `researchcrew`)."
    )
    researchcrew: ResearchOptions | None = Field(
        default=None,
        description="researchcrew's own options (sources, tool options, deadline, answer style) for this question.",
    )


# ---- responses ------------------------------------------------------------------------------------------------


class Usage(BaseModel):
    """Tokens the language model spent on this answer (all zero for an extractive answer without an LLM)."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(ge=0, description="Tokens sent to the language model, over all its calls.")
    completion_tokens: int = Field(ge=0, description="Tokens the language model wrote, over all its calls.")
    total_tokens: int = Field(ge=0, description="prompt_tokens + completion_tokens.")
    cost_usd: float | None = Field(
        default=0.0,
        ge=0,
        description="What those tokens cost in US dollars (researchcrew's addition, as OpenRouter adds `cost`); "
        "null when the model's price is unknown, 0 without LLM calls.",
    )


class ResearchDetails(BaseModel):
    """What researchcrew adds to an OpenAI answer: the structured citations and what each source did."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(description="The researchcrew session the conversation maps to (`/v1/sessions/{id}`).")
    session_source: Literal["metadata", "header", "conversation"] = Field(
        description="How the session was chosen: `metadata.session_id`, a front-end's chat-id header, or derived "
        "from the user and the conversation's first user message."
    )
    response_id: str = Field(description="The answer's id in researchcrew's memory.")
    question: str = Field(description="The question researched: the last user message.")
    answer_kind: AnswerKind = Field(description="generated, extractive, uncertainty or refusal.")
    confidence: float = Field(ge=0, le=1, description="The answer's overall confidence, 0-1.")
    confidence_level: ConfidenceLevel = Field(description="high, medium, low or insufficient.")
    citations: list[Citation] = Field(description="The numbered sources; `number` is the [n] in the content.")
    source_reports: list[SourceReport] = Field(description="Every source searched: used, empty, or failed and why.")
    caveats: list[str] = Field(description="What the reader should know (gaps, failures, time limits).")
    partial: bool = Field(description="True when the run's deadline cut work short.")
    standalone_question: str | None = Field(
        default=None, description="A follow-up's stand-alone form, as researched (None: researched as asked)."
    )


class AssistantMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] = Field(default="assistant", description="Always `assistant`.")
    content: str = Field(description="The answer (Markdown) with [n] markers, then its numbered sources.")
    refusal: None = Field(default=None, description="Always null: a refusal by researchcrew is in `content`.")


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int = Field(default=0, description="Always 0: one answer per request.")
    message: AssistantMessage = Field(description="The answer.")
    finish_reason: Literal["stop"] = Field(default="stop", description="Always `stop`: answers are never cut.")
    logprobs: None = Field(default=None, description="Always null.")


class ChatCompletion(BaseModel):
    """The answer, as OpenAI's ``chat.completion`` object, with researchcrew's details in ``researchcrew``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="`chatcmpl-` and the answer's id.")
    object: Literal["chat.completion"] = Field(default="chat.completion", description="The object type.")
    created: int = Field(description="When the answer was made (Unix seconds).")
    model: str = Field(description="The model id that was asked for.")
    system_fingerprint: str | None = Field(default=None, description="Always null.")
    choices: list[Choice] = Field(description="One choice.")
    usage: Usage = Field(description="Tokens the language model spent on this answer.")
    researchcrew: ResearchDetails = Field(description="Structured citations and source reports.")


class Delta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] | None = Field(default=None, description="Set on the first chunk.")
    content: str | None = Field(default=None, description="The next piece of the answer.")
    reasoning_content: str | None = Field(
        default=None,
        description="Progress while the question is researched (each source answering or failing), one line at a "
        "time; chat front-ends show it as the model's thinking, apart from the answer.",
    )


class ChunkChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int = Field(default=0, description="Always 0.")
    delta: Delta = Field(description="What this chunk adds.")
    finish_reason: Literal["stop"] | None = Field(default=None, description="`stop` on the last chunk of the answer.")
    logprobs: None = Field(default=None, description="Always null.")


class ChatCompletionChunk(BaseModel):
    """One server-sent chunk of a streamed answer (``data: {...}``)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The same on every chunk of one answer.")
    object: Literal["chat.completion.chunk"] = Field(default="chat.completion.chunk", description="The object type.")
    created: int = Field(description="When the request started (Unix seconds).")
    model: str = Field(description="The model id that was asked for.")
    system_fingerprint: str | None = Field(default=None, description="Always null.")
    choices: list[ChunkChoice] = Field(description="One choice; none on the usage chunk.")
    usage: Usage | None = Field(default=None, description="Only on the last chunk, with `include_usage`.")
    researchcrew: ResearchDetails | None = Field(default=None, description="On the chunk that finishes the answer.")


class ModelCard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The model id to send as `model`.")
    object: Literal["model"] = Field(default="model", description="The object type.")
    created: int = Field(description="When this service process started (Unix seconds).")
    owned_by: str = Field(default="researchcrew", description="Always `researchcrew`.")
    description: str = Field(description="What answers from this model are like.")


class ModelList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    object: Literal["list"] = Field(default="list", description="The object type.")
    data: list[ModelCard] = Field(description="The models.")


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(description="What went wrong, and what to do about it.")
    type: str = Field(description="invalid_request_error, authentication_error, rate_limit_error, server_error, ...")
    param: str | None = Field(default=None, description="The request parameter at fault, when one is.")
    code: str | None = Field(default=None, description="A machine-readable code, when there is one.")


class ErrorBody(BaseModel):
    """An error in OpenAI's shape (``{"error": {...}}``), which OpenAI clients parse."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail = Field(description="The error.")
