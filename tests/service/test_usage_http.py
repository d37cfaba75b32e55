"""What each user's answers cost, over HTTP (issue 23): ``GET /v1/usage`` by day, per user only; and the monthly
budget — past it a new question answers 402 problem+json naming the budget, on the chat and the OpenAI routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from researchcrew.settings import ServiceSettings, Settings
from researchcrew.testing import FakeLLM
from tests.openai_compat.support import Harness as ServiceHarness
from tests.openai_compat.support import running_service
from tests.service.support import QUESTION

DRAFT = json.dumps(
    {
        "sections": [
            {
                "heading": "",
                "perspective": None,
                "claims": [{"text": "Metamorphic testing checks relations between outputs.", "citations": [1]}],
            }
        ]
    }
)


def priced_llm() -> FakeLLM:
    return FakeLLM([DRAFT] * 10, model="openai/gpt-4o-mini")  # a model the price table knows


async def ask(service: ServiceHarness, user: str) -> tuple[int, dict[str, object]]:
    async with service.client() as client:
        created = await client.post("/v1/sessions", headers=service.auth(user), json={})
        session_id = created.json()["session_id"]
        reply = await client.post(
            f"/v1/sessions/{session_id}/messages", headers=service.auth(user), json={"question": QUESTION}
        )
    return reply.status_code, reply.json()


async def test_usage_shows_the_caller_s_questions_tokens_and_cost_by_day(tmp_path: Path) -> None:
    async with running_service(Settings(data_dir=tmp_path), llm=priced_llm()) as service:
        answers = [await ask(service, "ada"), await ask(service, "ada")]
        async with service.client() as client:
            ada = (await client.get("/v1/usage?since=7d", headers=service.auth("ada"))).json()
            bob = (await client.get("/v1/usage", headers=service.auth("bob"))).json()
            wrong = await client.get("/v1/usage?since=yesterday", headers=service.auth("ada"))

    assert all(status == 200 for status, _ in answers)
    costs = [body["cost"]["usd"] for _, body in answers]  # type: ignore[index]
    assert all(isinstance(cost, float) and cost > 0 for cost in costs)
    [today] = ada["days"]
    assert today["questions"] == 2 and today["unpriced"] == 0
    assert today["cost_usd"] == pytest.approx(sum(costs))
    tokens = [body["token_usage"]["total"] for _, body in answers]  # type: ignore[index]
    assert today["prompt_tokens"] == sum(t["prompt_tokens"] for t in tokens)
    assert ada["month_cost_usd"] == pytest.approx(sum(costs)) and ada["monthly_budget_usd"] is None
    assert bob["days"] == [] and bob["total"] is None  # only the caller's own usage
    assert wrong.status_code == 422 and "7d" in wrong.json()["detail"]


async def test_past_the_monthly_budget_a_new_question_answers_402_naming_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, service=ServiceSettings(monthly_budget_usd=0.000001))
    async with running_service(settings, llm=priced_llm()) as service:
        first, _ = await ask(service, "ada")  # nothing spent yet: answered (and it costs more than the budget)
        second, problem = await ask(service, "ada")
        other, _ = await ask(service, "bob")  # a budget is per user
        async with service.openai() as client:
            from openai import APIStatusError

            with pytest.raises(APIStatusError) as refused:
                await client.chat.completions.create(
                    model="researchcrew", messages=[{"role": "user", "content": QUESTION}]
                )

    assert (first, second, other) == (200, 402, 200)
    assert problem["status"] == 402 and "RESEARCHCREW_SERVICE__MONTHLY_BUDGET_USD" in str(problem["detail"])
    assert "renews on" in str(problem["detail"])
    assert refused.value.status_code == 402
