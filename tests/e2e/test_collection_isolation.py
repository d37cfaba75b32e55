"""Who may read what, through every door at once (issue 19 item 4): one runtime over a real knowledge base (Milvus
Lite) and memory database (SQLite), the SDK, the chat service, the OpenAI-compatible route, a batch job and a deep
research run on it. Ada's private document never reaches Bob by any of them, while Ada finds it; shared documents
(ingested as today) reach everyone; a member removed from a named collection loses it with the next question."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.contracts import RetrieverInput
from researchcrew.embedding.embedder import Embedder
from researchcrew.errors import ResearchCrewError
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.collections_store import CollectionsStore
from researchcrew.knowledge.documents import Document
from researchcrew.memory.store import MemoryStore
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.service._app import create_app
from researchcrew.settings import DeepResearchSettings, RetrievalSettings, ServiceSettings
from researchcrew.tools.rag import RAGTool
from tests.e2e.support import demo_documents, offline_settings
from tests.service.support import ServiceHarness

SECRET_MARK = "Vellmore"  # in Ada's private document only (never in a question)
TEAM_MARK = "Quillfeather"  # in the team's document only
SECRET = Document(
    source_key="ada/sieve.md",
    title=f"{SECRET_MARK} laboratory notes on the zorblat sieve",
    text=f"The zorblat sieve separates entangled photon pairs inside cryogenic detectors at the {SECRET_MARK} "
    f"laboratory. The {SECRET_MARK} team measured that the zorblat sieve keeps 93 percent of photon pairs.",
)
TEAM = Document(
    source_key="team/grommet.md",
    title=f"{TEAM_MARK} memo on grommet torsion",
    text=f"Grommet torsion in the {TEAM_MARK} rig loosens the seals after 400 cycles. The {TEAM_MARK} engineers "
    "replace grommets every 350 cycles to avoid torsion failures.",
)
SECRET_QUESTION = "What does the zorblat sieve separate in cryogenic detectors?"
TEAM_QUESTION = "After how many cycles does grommet torsion loosen the seals?"
SHARED_QUESTION = "What is metamorphic testing?"


@dataclass
class Doors:
    assistant: ResearchAssistant
    service: ServiceHarness
    collections: CollectionsStore
    knowledge_base: KnowledgeBase


@pytest.fixture
async def doors(tmp_path: Path, embedder: Embedder) -> AsyncIterator[Doors]:
    settings = offline_settings(
        tmp_path, service=ServiceSettings(), deep=DeepResearchSettings(), enabled_sources=["rag"]
    )
    knowledge_base = KnowledgeBase(settings, embedder=embedder)
    knowledge_base.add_documents(demo_documents(("Metamorphic",)))  # as `researchcrew ingest` does: shared
    knowledge_base.add_documents([SECRET], collection="user:ada")
    knowledge_base.add_documents([TEAM], collection="team-x")
    store = await MemoryStore.open(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}", embedder=embedder)
    collections = CollectionsStore(store.engine)
    await collections.create("team-x", members=["ada", "bob"])
    assistant = ResearchAssistant(settings, knowledge_base=knowledge_base, memory_store=store, remember=False)
    app = create_app(settings, runtime=assistant.runtime)
    harness = ServiceHarness(app, assistant.runtime)
    try:
        async with app.router.lifespan_context(app):
            await harness.add_user("ada")
            await harness.add_user("bob")
            yield Doors(assistant, harness, collections, knowledge_base)
    finally:
        await assistant.aclose()
        await store.close()
        knowledge_base.close()


async def _sdk(doors: Doors, user: str, question: str) -> str:
    return (await doors.assistant.ask(question, user_id=user)).model_dump_json()


async def _chat(doors: Doors, user: str, question: str) -> str:
    async with doors.service.client() as http:
        made = await http.post("/v1/sessions", headers=doors.service.auth(user), json={})
        assert made.status_code == 201, made.text
        response = await http.post(
            f"/v1/sessions/{made.json()['session_id']}/messages",
            headers=doors.service.auth(user),
            json={"question": question},
        )
    assert response.status_code == 200, response.text
    return response.text


async def _openai(doors: Doors, user: str, question: str) -> str:
    body = {"model": "researchcrew", "messages": [{"role": "user", "content": question}]}
    async with doors.service.client() as http:
        response = await http.post("/v1/chat/completions", headers=doors.service.auth(user), json=body)
    assert response.status_code == 200, response.text
    return response.text


async def _job(doors: Doors, user: str, question: str) -> str:
    jobs = doors.assistant.jobs
    name = f"job-{abs(hash(question)) % 10_000}"
    await jobs.create(user, name=name, questions=[question])
    run = await jobs.run(user, name)
    return json.dumps([result.model_dump(mode="json") for result in await jobs.results(user, run.id)])


async def _deep(doors: Doors, user: str, question: str) -> str:
    run = await doors.assistant.research(question, user_id=user, approve=True, max_subquestions=2, clarify=False)
    assert run.status == "completed", run.status
    return run.model_dump_json()


DOORS = {"sdk": _sdk, "chat": _chat, "openai": _openai, "job": _job, "deep research": _deep}


async def test_a_private_document_reaches_its_owner_only_by_every_door(doors: Doors) -> None:
    for name, door in DOORS.items():
        assert SECRET_MARK in await door(doors, "ada", SECRET_QUESTION), f"{name}: Ada does not find her document"
        assert SECRET_MARK not in await door(doors, "bob", SECRET_QUESTION), f"{name}: Bob got Ada's document"


async def test_shared_documents_reach_everyone(doors: Doors) -> None:
    for user in ("ada", "bob", "eve"):
        answer = await doors.assistant.ask(SHARED_QUESTION, user_id=user)
        assert answer.citations and all(c.source_type == "rag" for c in answer.citations), user


async def test_a_removed_member_loses_access_at_once(doors: Doors) -> None:
    assert TEAM_MARK in await _chat(doors, "bob", TEAM_QUESTION)
    assert TEAM_MARK not in await _sdk(doors, "eve", TEAM_QUESTION)
    await doors.collections.change_members("team-x", remove=["bob"])
    for name, door in (("sdk", _sdk), ("chat", _chat), ("openai", _openai)):
        assert TEAM_MARK not in await door(doors, "bob", TEAM_QUESTION), f"{name}: Bob still reads team-x"
    assert TEAM_MARK in await _openai(doors, "ada", TEAM_QUESTION)


async def test_no_option_searches_as_another_user(doors: Doors) -> None:
    options = {"rag": {"user_id": "ada"}}
    async with doors.service.client() as http:
        made = (await http.post("/v1/sessions", headers=doors.service.auth("bob"), json={})).json()
        response = await http.post(
            f"/v1/sessions/{made['session_id']}/messages",
            headers=doors.service.auth("bob"),
            json={"question": SECRET_QUESTION, "tool_options": options},
        )
    assert response.status_code == 422 and "tool_options" in response.text
    with pytest.raises(ResearchCrewError, match="searches as the user who asks"):
        await doors.assistant.ask(SECRET_QUESTION, user_id="bob", tool_options=options)
    # Below the contract, the Retriever still passes the asking user last: an option cannot override it.
    retriever = Retriever([RAGTool(doors.knowledge_base, access=doors.collections)], settings=RetrievalSettings())
    smuggled = {"rag": {"user_id": "ada", "min_relevance": 0.0}}
    for user, finds in (("bob", False), ("ada", True)):
        asked = RetrieverInput(query_text=SECRET_QUESTION, user_id=user, session_id="s", tool_options=smuggled)
        found = (await retriever.run(asked)).aggregated_context
        assert found.chunks and (SECRET_MARK in found.model_dump_json()) is finds, user
