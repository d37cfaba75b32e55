"""The SDK and the HTTP service decide alike whether a message answers something waiting in its session: the same
messages, sent through ``ResearchAssistant.ask_in_session``/``research`` and through ``POST
/v1/sessions/{id}/messages`` (the real app, lifespan running), over the same corpus, come out the same — a quick
clarification's reply, a paused deep run's answer, and a new question of its own while something waits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import FinalResponse
from researchcrew.contracts.deep import DeepRun
from researchcrew.settings import DeepResearchSettings, ServiceSettings, Settings
from tests.deep.corpus import CorpusTool
from tests.service.support import running_service

VAGUE = "What is known about the screening method?"  # the corpus answers only queries naming "pooled"
REPLY = "pooled testing of samples"
UNRELATED = "How do flaky tests affect continuous integration?"

# (what is sent, session, text): "ask" is an ordinary message of the session, "research" starts a deep run.
MESSAGES = [
    ("ask", "quick", VAGUE),  # nothing found: clarifying questions
    ("ask", "quick", REPLY),  # the reply: the question narrowed by it
    ("ask", "other", VAGUE),
    ("ask", "other", UNRELATED),  # a question of its own while a clarification waits: new
    ("research", "deep", VAGUE),  # a deep run pauses for clarification
    ("ask", "deep", UNRELATED),  # a question of its own while the run waits: a quick answer, the run still waits
    ("ask", "deep", REPLY),  # the run's answer (a quick clarification waits in the session too: the run comes first)
]
EXPECTED = [
    ("answer", "clarification", VAGUE),
    ("answer", "extractive", f"{VAGUE} ({REPLY})"),
    ("answer", "clarification", VAGUE),
    ("answer", "clarification", UNRELATED),
    ("run started", "awaiting_human_feedback", "clarification"),
    ("answer", "clarification", UNRELATED),
    ("run answered", VAGUE, "the run started above"),
]


def settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, service=ServiceSettings(), deep=DeepResearchSettings())


def outcome(result: FinalResponse | DeepRun, sent: str, runs: list[str]) -> tuple[str, str, str]:
    if isinstance(result, FinalResponse):
        return ("answer", result.answer_kind, result.query.text)
    if sent == "research":
        runs.append(result.run_id)
        return ("run started", result.status, str(result.awaiting))
    return ("run answered", result.question, "the run started above" if result.run_id in runs else result.run_id)


async def through_the_sdk(data_dir: Path) -> list[tuple[str, str, str]]:
    outcomes: list[tuple[str, str, str]] = []
    runs: list[str] = []
    tool = CorpusTool(only_if="pooled")
    async with ResearchAssistant(settings(data_dir), tools=[tool], remember=False) as assistant:
        for sent, session, text in MESSAGES:
            result: FinalResponse | DeepRun
            if sent == "research":
                result = await assistant.research(text, user_id="ada", session_id=session)
            else:
                result = await assistant.ask_in_session(text, user_id="ada", session_id=session)
            outcomes.append(outcome(result, sent, runs))
        answered = await assistant.get_research_run(runs[0], user_id="ada")
        assert answered.awaiting == "plan_approval" and answered.plan is not None
        assert answered.plan.question == f"{VAGUE} ({REPLY})"
    return outcomes


async def through_http(data_dir: Path) -> list[tuple[str, str, str]]:
    outcomes: list[tuple[str, str, str]] = []
    runs: list[str] = []
    tool = CorpusTool(only_if="pooled")
    async with running_service(settings(data_dir), tools=[tool], remember=False) as service, service.client() as http:
        headers = service.auth("ada")
        sessions: dict[str, str] = {}
        for sent, session, text in MESSAGES:
            if session not in sessions:
                sessions[session] = (await http.post("/v1/sessions", json={}, headers=headers)).json()["session_id"]
            body: dict[str, Any] = {"question": text} | ({"mode": "deep"} if sent == "research" else {})
            response = await http.post(f"/v1/sessions/{sessions[session]}/messages", json=body, headers=headers)
            assert response.status_code in (200, 202), response.text
            result = (FinalResponse if response.status_code == 200 else DeepRun).model_validate(response.json())
            outcomes.append(outcome(result, sent, runs))
        for _ in range(600):  # the answered run resumes in the service: let it reach its plan before shutting down
            answered = DeepRun.model_validate((await http.get(f"/v1/deep-runs/{runs[0]}", headers=headers)).json())
            if answered.status != "running":
                break
            await asyncio.sleep(0.05)
        assert answered.awaiting == "plan_approval" and answered.plan is not None
        assert answered.plan.question == f"{VAGUE} ({REPLY})"
    return outcomes


async def test_the_sdk_and_the_http_route_decide_alike_what_a_message_answers(tmp_path: Path) -> None:
    sdk = await through_the_sdk(tmp_path / "sdk")
    http = await through_http(tmp_path / "http")
    assert sdk == EXPECTED
    assert http == sdk
