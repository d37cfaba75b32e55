"""A deep run with crewAI's real ``LLM`` class against a loopback OpenAI-compatible server: the runtime builds a
fresh LLM per run from settings, every call the run makes reaches the server (plan, sub-question answers), and the
run's token count is the server's usage figures."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from researchcrew.contracts.deep import DeepOptions
from researchcrew.contracts.request import ResearchRequest
from researchcrew.runtime import open_runtime
from researchcrew.settings import LLMSettings, Settings
from tests.deep.corpus import CorpusTool
from tests.e2e.support import assert_every_claim_cited
from tests.loopback.openai import openai_server

SUB_QUESTIONS = ["What is pooled testing?", "What limits pooled testing?"]


def reply(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "sub_questions" in system:
        return json.dumps({"sub_questions": [{"question": q, "rationale": "r"} for q in SUB_QUESTIONS]})
    assert "<<<QUESTION>>>" in user, user[:300]
    first = re.search(r"<<<EVIDENCE 1>>>\n.*?text:\n(.*?)\n", user, flags=re.DOTALL)
    assert first is not None
    claim = {"text": first.group(1).split(". ")[0].rstrip(".") + ".", "citations": [1]}
    return json.dumps({"sections": [{"heading": "", "perspective": None, "claims": [claim]}]})


async def test_a_deep_run_through_the_real_llm_class(tmp_path: Path) -> None:
    with openai_server([reply] * 6, api_key="sk-deep") as (server, service):
        llm = LLMSettings(model="openai/test-model", base_url=f"{server.url}/v1", api_key=SecretStr("sk-deep"))
        settings = Settings(data_dir=tmp_path, llm=llm)
        async with open_runtime(settings, tools=[CorpusTool()], remember=False) as runtime:
            run = await (await runtime.deep_research()).research(
                ResearchRequest(question="What is known about pooled testing?", user_id="ada"),
                DeepOptions(auto_approve=True),
            )
    report = run.report
    assert run.status == "completed" and report is not None
    assert [item.question for item in report.plan.items] == SUB_QUESTIONS and report.plan.written_by == "llm"
    assert [sub.answer_kind for sub in report.sub_questions] == ["generated", "generated"]
    assert report.response.answer_kind == "generated"
    assert_every_claim_cited(report.response)
    assert len(service.bodies) == 3 and all(body["model"] == "test-model" for body in service.bodies)
    # The server reports 412 prompt tokens per call and a quarter of the reply's characters: the run counted exactly
    # what was reported, and each sub-question its own share.
    reported = [412 + max(1, len(reply(body)) // 4) for body in service.bodies]
    assert report.budget.tokens_used == sum(reported)
    assert [sub.tokens for sub in report.sub_questions] == reported[1:]
