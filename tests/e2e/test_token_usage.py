"""Token usage per LLM stage in the answer: counted from what the model reported, per question even when questions
share one LLM, zero without an LLM; with the shared FakeLLM and with crewAI's real ``LLM`` class against the
loopback OpenAI-compatible server (which returns a ``usage`` block like OpenAI does)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse, TokenCount, TokenUsage
from researchcrew.contracts.follow_up import USAGE_STAGES
from researchcrew.settings import ConfidenceSettings, LLMSettings
from researchcrew.testing.llm import FakeLLM, LLMCall, estimate_tokens
from tests.e2e.support import SpyTool, evidence, offline_settings
from tests.loopback.openai import chat_completion, openai_server
from tests.loopback.server import Reply

QUESTION = "What is metamorphic testing?"
CHUNKS = [
    evidence("mt-1", "Metamorphic testing checks relations between the outputs of several executions of a program."),
    evidence("mt-2", "Metamorphic relations describe how the output must change when the input is transformed."),
]
CONFLICTING = [
    evidence("acc-1", "The model reaches an accuracy of 92% on ImageNet.", source_type="web"),
    evidence("acc-2", "On ImageNet, the model's accuracy is only 75%.", source_type="arxiv"),
]


def draft(*claims: tuple[str, list[int]]) -> str:
    body = {"heading": "", "perspective": None, "claims": [{"text": t, "citations": c} for t, c in claims]}
    return json.dumps({"sections": [body]})


GOOD = draft(("Metamorphic testing checks relations between the outputs of executions.", [1]))


def counted(calls: list[LLMCall]) -> TokenCount:
    """What the FakeLLM reported for these calls."""
    total = TokenCount()
    for call in calls:
        assert call.usage is not None
        total = total + TokenCount.of(call.usage["prompt_tokens"], call.usage["completion_tokens"])
    return total


async def ask(
    tmp_path: Path, llm: FakeLLM | None, chunks: list[Any], question: str = QUESTION, **settings: Any
) -> FinalResponse:
    async with ResearchAssistant(
        offline_settings(tmp_path, **settings),
        tools=[SpyTool(chunks, source_type=chunks[0].source_type)],
        llm=llm,
        remember=False,
    ) as assistant:
        return await assistant.ask(question)


async def test_synthesis_tokens_are_what_the_model_reported(tmp_path: Path) -> None:
    llm = FakeLLM([GOOD])
    response = await ask(tmp_path, llm, CHUNKS)

    assert response.answer_kind == "generated"
    usage = response.token_usage
    assert usage.synthesis == counted(llm.calls) and usage.synthesis.calls == 1
    assert usage.synthesis.prompt_tokens == estimate_tokens("".join(str(m["content"]) for m in llm.calls[0].messages))
    assert usage.total == usage.synthesis
    assert usage.follow_up == usage.reformulation == usage.adjudication == TokenCount()
    assert TokenUsage.model_validate(json.loads(response.model_dump_json())["token_usage"]) == usage


async def test_an_answer_without_an_llm_spent_nothing(tmp_path: Path) -> None:
    response = await ask(tmp_path, None, CHUNKS)
    assert response.answer_kind == "extractive"
    assert response.token_usage == TokenUsage() and response.token_usage.total.total_tokens == 0


async def test_adjudication_and_a_repaired_synthesis_are_counted_per_stage(tmp_path: Path) -> None:
    verdict = json.dumps({"contradiction": True, "explanation": "Same model, same benchmark, different values."})
    unreadable = "I think the accuracy is disputed."
    repaired = draft(("One source reports 92% accuracy on ImageNet.", [1]), ("Another reports 75%.", [2]))
    llm = FakeLLM([verdict, unreadable, repaired])

    response = await ask(tmp_path, llm, CONFLICTING, "What accuracy does the model reach on ImageNet?")

    assert llm.remaining == 0 and response.answer_kind == "generated"
    adjudication, generation, repair = llm.calls
    usage = response.token_usage
    assert usage.adjudication == counted([adjudication])
    assert usage.synthesis == counted([generation, repair]) and usage.synthesis.calls == 2
    assert usage.total.total_tokens == sum(usage.stage(name).total_tokens for name in USAGE_STAGES)


async def test_reformulation_tokens_are_counted(tmp_path: Path) -> None:
    weak = [evidence("weak-1", "Testing software is hard.", relevance=0.3)]
    llm = FakeLLM(["metamorphic relations oracle problem", "metamorphic testing survey"])
    # Weak but not hopeless evidence is searched again (off-topic evidence is not: the gate gives up at once).
    response = await ask(tmp_path, llm, weak, confidence=ConfidenceSettings(reformulate_min_support=0.0))

    assert response.answer_kind == "uncertainty" and len(llm.calls) == 2
    assert response.token_usage.reformulation == counted(llm.calls)
    assert response.token_usage.synthesis == TokenCount()


async def test_questions_sharing_one_llm_each_count_only_their_own_calls(tmp_path: Path) -> None:
    # Four questions at once on one runtime and one LLM; each reply is sized by its question, so a count that
    # mixed the questions up would not match.
    def reply(messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m["content"]) for m in messages)
        size = next(n for n in (1, 2, 3, 4) if f"question number {n} " in text)
        return draft(("Metamorphic testing checks relations. " * size, [1]))

    llm = FakeLLM([reply] * 4, delay_s=0.05)
    # The marker "question number n" is in no passage: read word by word (late interaction, pipeline/_late.py) the
    # passage rightly supports these questions less, and they would be reformulated (more LLM calls than replies).
    # This test counts tokens per question, not support: late interaction off.
    settings = offline_settings(tmp_path, confidence=ConfidenceSettings(late_interaction_passages=0))
    async with ResearchAssistant(settings, tools=[SpyTool(CHUNKS)], llm=llm, remember=False) as assistant:
        responses = await asyncio.gather(
            *(assistant.ask(f"What is metamorphic testing, question number {n} ?") for n in (1, 2, 3, 4))
        )
    by_question = {
        next(
            n for n in (1, 2, 3, 4) if f"question number {n} " in "".join(str(m["content"]) for m in call.messages)
        ): call
        for call in llm.calls
    }
    for n, response in zip((1, 2, 3, 4), responses, strict=True):
        assert response.token_usage.synthesis == counted([by_question[n]]), n
    assert len({r.token_usage.synthesis.completion_tokens for r in responses}) == 4


async def test_crewai_llm_class_reports_the_servers_usage_per_stage(tmp_path: Path) -> None:
    verdict = json.dumps({"contradiction": True, "explanation": "Same model, different values."})
    answer = draft(("One source reports 92% accuracy on ImageNet.", [1]), ("Another reports 75%.", [2]))

    def completion(content: str, prompt_tokens: int) -> Any:
        return lambda body: Reply.json(chat_completion(content, model=str(body["model"]), prompt_tokens=prompt_tokens))

    with openai_server([completion(verdict, 211), completion(answer, 1534)], api_key="sk-loopback") as (server, _):
        llm = LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key="sk-loopback", timeout_s=10)
        tools = [SpyTool(CONFLICTING, source_type="web")]
        async with ResearchAssistant(offline_settings(tmp_path, llm=llm), tools=tools, remember=False) as assistant:
            response = await assistant.ask("What accuracy does the model reach on ImageNet?")

    assert response.answer_kind == "generated"
    usage = response.token_usage
    # The loopback server reports completion_tokens = len(content) // 4, as recorded from the real API's shape.
    assert usage.adjudication == TokenCount.of(211, len(verdict) // 4)
    assert usage.synthesis == TokenCount.of(1534, len(answer) // 4)
    assert usage.total == TokenCount.of(211 + 1534, len(verdict) // 4 + len(answer) // 4, calls=2)


@pytest.mark.parametrize("reported", [False, True])
async def test_a_provider_that_reports_no_usage_counts_the_call_with_zero_tokens(
    tmp_path: Path, reported: bool
) -> None:
    llm = FakeLLM([GOOD], report_usage=reported)
    response = await ask(tmp_path, llm, CHUNKS)
    assert response.token_usage.synthesis.calls == 1
    assert (response.token_usage.synthesis.total_tokens > 0) is reported


async def test_the_answer_says_what_its_tokens_cost_per_stage(tmp_path: Path) -> None:
    llm = FakeLLM([GOOD], model="openai/gpt-4o-mini")
    response = await ask(tmp_path, llm, CHUNKS)

    synthesis = response.token_usage.synthesis
    expected = synthesis.prompt_tokens * 0.15e-6 + synthesis.completion_tokens * 0.6e-6  # gpt-4o-mini's prices
    assert response.cost.priced and response.cost.model == "gpt-4o-mini"
    assert response.cost.stages == {"synthesis": pytest.approx(expected)}
    assert response.cost.usd == pytest.approx(expected)
    assert json.loads(response.model_dump_json())["cost"]["usd"] == pytest.approx(expected)


async def test_an_unknown_model_s_answer_says_price_unknown_and_an_extractive_one_costs_nothing(
    tmp_path: Path,
) -> None:
    unknown = await ask(tmp_path / "unknown", FakeLLM([GOOD]), CHUNKS)  # the FakeLLM's model has no price
    assert unknown.token_usage.synthesis.total_tokens > 0
    assert unknown.cost.usd is None and unknown.cost.summary().startswith("price unknown")

    extractive = await ask(tmp_path / "extractive", None, CHUNKS)
    assert extractive.cost.usd == 0.0 and extractive.cost.model is None
