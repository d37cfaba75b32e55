"""``/v1/documents`` against the real knowledge base (Milvus Lite in tmp_path, the packaged embedder): uploads are
checked by the loaders before anything is stored, ingested in the background with progress as SSE, listed per
user, deleted with their chunks, reindexed; a citation of an uploaded file names the file and its page/section."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from researchcrew.contracts.request import ResearchRequest
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import DocumentsSettings, EmbeddingSettings, ServiceSettings, Settings
from tests.e2e.support import MODEL_CACHE_DIR
from tests.ingestion.files import write_pdf
from tests.service.support import ServiceHarness

pytestmark = pytest.mark.slow

NOTES = (
    "# Lab notes\n\n## Flaky tests\n\nQuarantining flaky tests keeps the main branch green while the "
    "zorblax scheduler reruns them overnight.\n"
)


def settings_for(data_dir: Path, **documents: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        enabled_sources=["rag"],
        embedding=EmbeddingSettings(cache_dir=MODEL_CACHE_DIR),
        service=ServiceSettings(rate_limit="100000/minute"),
        documents=DocumentsSettings(**documents),
    )


@asynccontextmanager
async def library_service(settings: Settings) -> AsyncIterator[ServiceHarness]:
    """The app over the real knowledge base (RAG the only source), with keys for ada and bob."""
    runtime = open_runtime(settings)
    app = create_app(settings, runtime=runtime)
    harness = ServiceHarness(app, runtime)
    try:
        async with app.router.lifespan_context(app):
            accounts = Accounts(await runtime.memory_store())
            for name in ("ada", "bob"):  # a second start on the same data folder adds keys to the same users
                harness.keys[name] = (await accounts.add_user(name, another_key=True)).key
            yield harness
    finally:
        await runtime.aclose()


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ServiceHarness]:
    async with library_service(settings_for(tmp_path, max_file_bytes=200_000)) as harness:
        yield harness


@pytest.fixture
async def client(service: ServiceHarness) -> AsyncIterator[httpx.AsyncClient]:
    async with service.client() as http:
        yield http


async def upload(
    client: httpx.AsyncClient, user: dict[str, str], *files: tuple[str, bytes, str], **fields: str
) -> httpx.Response:
    parts = [("file", file) for file in files]
    return await client.post("/v1/documents", files=parts, data=fields, headers=user)


async def events_until_final(client: httpx.AsyncClient, user: dict[str, str], document_id: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    async with client.stream("GET", f"/v1/documents/{document_id}/events", headers=user) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
    return seen


async def chunk_count(service: ServiceHarness) -> int:
    knowledge_base: KnowledgeBase = await service.runtime.knowledge_base()
    return await asyncio.to_thread(knowledge_base.store.count)


async def test_an_upload_is_ingested_in_the_background_and_cited_by_its_file_name(
    service: ServiceHarness, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    ada = service.auth("ada")
    pdf = write_pdf(tmp_path / "x.pdf", ["Introduction to the survey.", "Methods: the zorblax scheduler reruns."])
    response = await upload(
        client,
        ada,
        ("lab-notes.md", NOTES.encode(), "text/markdown"),
        ("survey.pdf", pdf.read_bytes(), "application/pdf"),
    )
    assert response.status_code == 202, response.text
    accepted = response.json()["documents"]
    assert [(d["filename"], d["collection"], d["owner"]) for d in accepted] == [
        ("lab-notes.md", "user:ada", "ada"),
        ("survey.pdf", "user:ada", "ada"),
    ]
    assert {d["status"] for d in accepted} <= {"queued", "ingesting"}
    events = await events_until_final(client, ada, accepted[1]["id"])
    assert events[-1]["status"] == "ready" and events[-1]["chunks"] >= 2
    await service.app.state.service.library.wait_idle()

    listed = (await client.get("/v1/documents", headers=ada)).json()
    assert listed["total"] == 2 and listed["next_offset"] is None
    assert {d["status"] for d in listed["documents"]} == {"ready"}
    one = (await client.get("/v1/documents", params={"limit": 1}, headers=ada)).json()
    assert len(one["documents"]) == 1 and one["next_offset"] == 1

    answer = await service.runtime.ask(ResearchRequest(question="What does the zorblax scheduler do?", user_id="ada"))
    files = {citation.file_name: citation for citation in answer.citations if citation.source_type == "rag"}
    assert set(files) <= {"lab-notes.md", "survey.pdf"} and files, answer.citations
    for name, citation in files.items():
        assert citation.label == name
        assert citation.title in ("Lab notes", "x", "survey"), citation.title  # the file's own title, not a hash
        assert citation.location and ("p. 2" in citation.location or "§ Flaky tests" in citation.location)


@pytest.mark.parametrize(
    ("name", "content", "media_type", "status", "reason"),
    [
        ("broken.pdf", b"%PDF-1.4\nthis is not a pdf at all\n%%EOF", "application/pdf", 422, "broken.pdf"),
        ("empty.md", b"", "text/markdown", 422, "empty"),
        ("photo.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png", 415, "unsupported file type"),
        ("records.jsonl", b'{"id": "1", "text": "fine"}\n{not json\n', "application/x-ndjson", 422, "line 2"),
        ("big.txt", b"word " * 50_000, "text/plain", 413, "the limit is 200000 bytes per file"),
        ("huge.txt", b"word " * 100_000, "text/plain", 413, "The request body is larger than"),
    ],
)
async def test_a_bad_file_is_refused_with_the_loaders_reason_and_nothing_is_stored(
    service: ServiceHarness,
    client: httpx.AsyncClient,
    name: str,
    content: bytes,
    media_type: str,
    status: int,
    reason: str,
) -> None:
    ada = service.auth("ada")
    good = ("good.md", NOTES.encode(), "text/markdown")
    response = await upload(client, ada, good, (name, content, media_type))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert reason in response.json()["detail"]
    assert (await client.get("/v1/documents", headers=ada)).json()["total"] == 0  # not even the good file
    assert await chunk_count(service) == 0
    folder = service.runtime.settings.data_dir / "documents"
    assert not folder.exists() or list(folder.iterdir()) == []


async def test_another_user_can_neither_list_read_nor_delete_a_document(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    ada, bob = service.auth("ada"), service.auth("bob")
    document = (await upload(client, ada, ("notes.md", NOTES.encode(), "text/markdown"))).json()["documents"][0]
    await service.app.state.service.library.wait_idle()
    assert (await client.get("/v1/documents", headers=bob)).json()["total"] == 0
    for method, path in (
        ("GET", f"/v1/documents/{document['id']}"),
        ("DELETE", f"/v1/documents/{document['id']}"),
        ("POST", f"/v1/documents/{document['id']}/reindex"),
        ("GET", f"/v1/documents/{document['id']}/events"),
    ):
        response = await client.request(method, path, headers=bob)
        assert response.status_code == 404, (method, path, response.text)
        missing = await client.request(method, path.replace(document["id"], "0" * 32), headers=bob)
        assert response.json()["detail"] == missing.json()["detail"].replace("0" * 32, document["id"])
    refused = await upload(client, bob, ("x.md", NOTES.encode(), "text/markdown"), collection="user:ada")
    assert refused.status_code == 403
    assert (await client.get(f"/v1/documents/{document['id']}", headers=ada)).json()["status"] == "ready"


async def test_delete_removes_the_chunks_and_reindex_ingests_the_file_again(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    ada = service.auth("ada")
    files = [("a.md", NOTES.encode(), "text/markdown"), ("b.txt", b"Mutation testing seeds faults.", "text/plain")]
    first, second = (await upload(client, ada, *files)).json()["documents"]
    library = service.app.state.service.library
    await library.wait_idle()
    both = await chunk_count(service)
    assert both >= 2

    reindexed = await client.post(f"/v1/documents/{second['id']}/reindex", headers=ada)
    assert reindexed.status_code == 202 and reindexed.json()["status"] == "queued"
    await library.wait_idle()
    again = (await client.get(f"/v1/documents/{second['id']}", headers=ada)).json()
    assert again["status"] == "ready" and again["chunks"] >= 1
    assert await chunk_count(service) == both  # unchanged chunks kept, none duplicated

    assert (await client.delete(f"/v1/documents/{first['id']}", headers=ada)).status_code == 204
    assert await chunk_count(service) == again["chunks"]
    assert (await client.get(f"/v1/documents/{first['id']}", headers=ada)).status_code == 404
    assert not (service.runtime.settings.data_dir / "documents" / first["id"]).exists()


async def test_per_user_count_limit(tmp_path: Path) -> None:
    async with library_service(settings_for(tmp_path, max_documents_per_user=2)) as service, service.client() as client:
        ada, bob = service.auth("ada"), service.auth("bob")
        assert (await upload(client, ada, ("a.md", NOTES.encode(), "text/markdown"))).status_code == 202
        over = await upload(
            client, ada, ("b.md", b"# B\n\nbee", "text/markdown"), ("c.md", b"# C\n\nsea", "text/markdown")
        )
        assert over.status_code == 409 and "limit of 2" in over.json()["detail"]
        assert (await upload(client, bob, ("b.md", b"# B\n\nbee", "text/markdown"))).status_code == 202
        await service.app.state.service.library.wait_idle()
        assert (await client.get("/v1/documents", headers=ada)).json()["total"] == 1


async def test_a_raw_body_upload_names_its_file(service: ServiceHarness, client: httpx.AsyncClient) -> None:
    ada = service.auth("ada")
    response = await client.post(
        "/v1/documents",
        params={"filename": "notes"},
        content=NOTES.encode(),
        headers={**ada, "Content-Type": "text/markdown"},
    )
    assert response.status_code == 202, response.text
    assert response.json()["documents"][0]["filename"] == "notes.md"


async def test_an_upload_is_searched_for_its_owner_only(service: ServiceHarness, client: httpx.AsyncClient) -> None:
    """Uploads go to the uploader's private collection, and the knowledge-base search of every other user leaves
    them out in the Milvus filter itself (issue 19 item 4): Bob's question about the notes finds nothing of them."""
    ada, bob = service.auth("ada"), service.auth("bob")
    response = await upload(client, ada, ("lab-notes.md", NOTES.encode(), "text/markdown"))
    assert response.status_code == 202, response.text
    document_id = response.json()["documents"][0]["id"]
    assert (await events_until_final(client, ada, document_id))[-1]["status"] == "ready"

    async def ask(user: dict[str, str]) -> dict[str, Any]:
        session = (await client.post("/v1/sessions", headers=user, json={})).json()["session_id"]
        question = {"question": "Which scheduler reruns quarantined flaky tests overnight?"}
        reply = await client.post(f"/v1/sessions/{session}/messages", headers=user, json=question)
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body

    mine, theirs = await ask(ada), await ask(bob)
    assert any(c["file_name"] == "lab-notes.md" for c in mine["citations"]), mine["citations"]
    assert not any("lab-notes" in json.dumps(c) for c in theirs["citations"])
    assert "zorblax" not in theirs["answer"]


async def test_a_question_searches_only_the_collections_it_names_even_when_widened(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    """The page's Collections toggles send ``tool_options.rag.filters.collections``: leaving "My documents" out
    keeps the uploads out, also when nothing matched and the search was widened (its other filters relaxed)."""
    ada = service.auth("ada")
    response = await upload(client, ada, ("lab-notes.md", NOTES.encode(), "text/markdown"))
    assert (await events_until_final(client, ada, response.json()["documents"][0]["id"]))[-1]["status"] == "ready"
    session = (await client.post("/v1/sessions", headers=ada, json={})).json()["session_id"]
    question = {
        "question": "What does the zorblax scheduler do?",
        "tool_options": {"rag": {"filters": {"collections": ["shared"]}}},
    }
    reply = await client.post(f"/v1/sessions/{session}/messages", headers=ada, json=question)
    assert reply.status_code == 200, reply.text
    assert not any(c.get("file_name") == "lab-notes.md" for c in reply.json()["citations"])


async def test_an_uploaded_table_is_annotated_and_its_annotations_go_with_the_document(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    # Issue 22: an upload gets the facts and table rows a file ingested from the CLI gets, in the uploader's
    # collection; deleting the document removes them (they would otherwise answer structured questions).
    from researchcrew.knowledge.access import private_collection
    from researchcrew.knowledge.annotations import index_for

    ada = service.auth("ada")
    table = b"model,width,price\nSP-100,1.15 m,199\nSP-200,1.32 m,249\n"
    response = await upload(client, ada, ("panels.csv", table, "text/csv"))
    assert response.status_code == 202, response.text
    document = response.json()["documents"][0]
    await service.app.state.service.library.wait_idle()
    assert (await client.get(f"/v1/documents/{document['id']}", headers=ada)).json()["status"] == "ready"

    annotations = index_for(await service.runtime.knowledge_base())
    assert annotations is not None
    mine = [private_collection("ada")]
    stored = await asyncio.to_thread(annotations.read, mine)
    rows = [item.annotation for item in stored if item.annotation.kind == "row"]
    assert len(rows) == 2 and {Path(row.file or "").name for row in rows} == {"panels.csv"}
    assert await asyncio.to_thread(annotations.read, ["shared"]) == []  # in the uploader's collection only

    assert (await client.delete(f"/v1/documents/{document['id']}", headers=ada)).status_code == 204
    assert await asyncio.to_thread(annotations.read, mine) == []


async def test_an_uploaded_long_document_is_summarised_and_its_summaries_go_with_it(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    # Issue 22's long-text route: an upload long enough gets its summaries (the whole document and each section) in
    # the uploader's collection, made again on reindex; deleting the document removes them.
    from researchcrew.knowledge.access import private_collection
    from researchcrew.knowledge.summaries import summaries_for
    from tests.structured.long_documents import SECTIONS, manual_markdown

    ada = service.auth("ada")
    response = await upload(client, ada, ("manual.md", manual_markdown().encode(), "text/markdown"))
    assert response.status_code == 202, response.text
    document = response.json()["documents"][0]
    await service.app.state.service.library.wait_idle()
    summaries = summaries_for(await service.runtime.knowledge_base())
    assert summaries is not None
    mine = [private_collection("ada")]
    stored = await asyncio.to_thread(summaries.read, mine)
    assert {hit.heading for hit in stored if hit.kind == "section"} == set(SECTIONS)
    assert await asyncio.to_thread(summaries.read, ["shared"]) == []  # in the uploader's collection only

    reindexed = await client.post(f"/v1/documents/{document['id']}/reindex", headers=ada)
    assert reindexed.status_code in (200, 202), reindexed.text
    await service.app.state.service.library.wait_idle()
    assert len(await asyncio.to_thread(summaries.read, mine)) == 1 + len(SECTIONS)

    assert (await client.delete(f"/v1/documents/{document['id']}", headers=ada)).status_code == 204
    assert await asyncio.to_thread(summaries.read, mine) == []


async def test_members_of_a_shared_collection_list_and_read_its_documents(
    service: ServiceHarness, client: httpx.AsyncClient
) -> None:
    """Issue 19 item 4: a named collection's documents are listed and read by its members (not only by whoever
    uploaded them), deleted by the uploader or the collection's owner only; a member removed loses them at once."""
    for name in ("carol", "olga"):
        await service.add_user(name)
    ada, bob, carol, olga = (service.auth(name) for name in ("ada", "bob", "carol", "olga"))
    made = await client.post("/v1/collections", headers=olga, json={"name": "team-x", "members": ["ada", "bob"]})
    assert made.status_code == 201, made.text
    files = [("a.md", NOTES.encode(), "text/markdown"), ("b.txt", b"Mutation testing seeds faults.", "text/plain")]
    shared = (await upload(client, ada, *files, collection="team-x")).json()["documents"]
    private = (await upload(client, ada, ("mine.md", b"# Mine\n\nOnly ada's.", "text/markdown"))).json()
    await service.app.state.service.library.wait_idle()
    first = shared[0]["id"]

    listed = (await client.get("/v1/documents", headers=bob)).json()
    assert listed["total"] == 2 and {d["id"] for d in listed["documents"]} == {d["id"] for d in shared}
    assert {(d["owner"], d["collection"]) for d in listed["documents"]} == {("ada", "team-x")}
    page = (await client.get("/v1/documents", params={"limit": 1, "offset": 1}, headers=bob)).json()
    assert page["total"] == 2 and len(page["documents"]) == 1 and page["next_offset"] is None
    assert (await client.get("/v1/documents", headers=ada)).json()["total"] == 3
    read = await client.get(f"/v1/documents/{first}", headers=bob)
    assert read.status_code == 200 and read.json()["status"] == "ready"
    # The page shows Delete only where it would work: the uploader and the collection's owner, not a member.
    assert not any(d["may_change"] for d in listed["documents"]) and read.json()["may_change"] is False
    for owner in (ada, olga):
        assert all(d["may_change"] for d in (await client.get("/v1/documents", headers=owner)).json()["documents"])
    assert (await client.get(f"/v1/documents/{first}", headers=olga)).json()["may_change"] is True
    private_id = private["documents"][0]["id"]
    assert (await client.get(f"/v1/documents/{private_id}", headers=bob)).status_code == 404
    for method, path in (("DELETE", f"/v1/documents/{first}"), ("POST", f"/v1/documents/{first}/reindex")):
        refused = await client.request(method, path, headers=bob)
        assert refused.status_code == 403, (method, refused.text)
        assert (await client.request(method, path, headers=carol)).status_code == 404

    assert (await client.get("/v1/documents", headers=carol)).json()["total"] == 0
    assert (await client.get(f"/v1/documents/{first}", headers=carol)).status_code == 404

    removed = await client.patch("/v1/collections/team-x/members", headers=olga, json={"remove": ["bob"]})
    assert removed.status_code == 200, removed.text
    assert (await client.get("/v1/documents", headers=bob)).json() == {
        "documents": [],
        "total": 0,
        "limit": 50,
        "offset": 0,
        "next_offset": None,
    }
    assert (await client.get(f"/v1/documents/{first}", headers=bob)).status_code == 404

    assert (await client.delete(f"/v1/documents/{first}", headers=olga)).status_code == 204  # the collection's owner
    assert (await client.get("/v1/documents", headers=ada)).json()["total"] == 2
