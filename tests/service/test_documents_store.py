"""The documents' repository on SQLite and PostgreSQL, documents from URLs (through the address policy), a store
failure part-way through an ingestion (nothing half-stored), and queued documents surviving a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from researchcrew.db.engine import create_engine, upgrade
from researchcrew.errors import DocumentForbiddenError, DocumentNotFoundError, DocumentQuotaError, KnowledgeBaseError
from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.collections_store import CollectionsStore
from researchcrew.knowledge.document_store import (
    DocumentStore,
    StoredDocument,
    may_write_collection,
)
from tests.loopback.server import LoopbackServer, Reply, Request
from tests.memory_store.conftest import Database
from tests.service.test_documents_http import NOTES, chunk_count, library_service, settings_for, upload

pytestmark = pytest.mark.slow


def record(document_id: str, owner: str = "ada", *, size: int = 10, minutes: int = 0, **fields: Any) -> StoredDocument:
    when = datetime(2026, 11, 27, tzinfo=UTC) + timedelta(minutes=minutes)
    values: dict[str, Any] = {
        "id": document_id,
        "owner": owner,
        "collection": f"user:{owner}",
        "filename": f"{document_id}.md",
        "format": "markdown",
        "size_bytes": size,
        "sha256": "0" * 64,
        "status": "queued",
        "source_keys": [f"/data/{document_id}.md"],
        "created_at": when,
        "updated_at": when,
        **fields,
    }
    return StoredDocument(**values)


@pytest.fixture
async def store(database: Database) -> AsyncIterator[DocumentStore]:
    engine = create_engine(database.url)
    await upgrade(engine)
    try:
        yield DocumentStore(engine)
    finally:
        await engine.dispose()


async def test_the_repository_pages_updates_and_enforces_quotas(store: DocumentStore) -> None:
    await store.add([record("a", minutes=1), record("b", minutes=2)], max_documents=3, max_bytes=100)
    await store.add([record("c", owner="bob", minutes=3)], max_documents=3, max_bytes=100)
    with pytest.raises(DocumentQuotaError, match="limit of 3"):
        await store.add([record("d"), record("e")], max_documents=3, max_bytes=100)
    with pytest.raises(DocumentQuotaError, match="limit of 100 bytes"):
        await store.add([record("f", size=90)], max_documents=3, max_bytes=100)
    assert await store.get("d") is None and await store.get("f") is None  # all or nothing

    page, total = await store.list_readable("ada", limit=1)
    assert total == 2 and [d.id for d in page] == ["b"]  # newest first
    page, _ = await store.list_readable("ada", limit=5, offset=1)
    assert [d.id for d in page] == ["a"]

    ready = await store.update("a", status="ready", chunks=4)
    assert ready is not None and ready.finished_at is not None and ready.chunks == 4
    assert [d.id for d in (await store.list_readable("ada", limit=5, status="ready"))[0]] == ["a"]
    assert [d.id for d in await store.unfinished()] == ["b", "c"]
    assert (await store.get_for("ada", "a")).source_keys == ["/data/a.md"]
    with pytest.raises(DocumentNotFoundError):
        await store.get_for("bob", "a")
    assert await store.delete("a") and not await store.delete("a")
    assert await store.update("a", status="failed") is None


def test_who_may_write_without_a_collections_store() -> None:
    assert may_write_collection("ada", "user:ada") and not may_write_collection("bob", "user:ada")
    assert may_write_collection("bob", "team-x")


@pytest.fixture
async def stores(database: Database) -> AsyncIterator[tuple[DocumentStore, CollectionsStore]]:
    engine = create_engine(database.url)
    await upgrade(engine)
    try:
        yield DocumentStore(engine), CollectionsStore(engine)
    finally:
        await engine.dispose()


async def test_who_may_list_read_and_change_a_document(stores: tuple[DocumentStore, CollectionsStore]) -> None:
    """Issue 19 item 4, in the query itself: the owner and whoever reads the document's collection list and read
    it (members of a named one, everyone for `shared`); the uploader and the collection's owner change it."""
    store, collections = stores
    await collections.create("team-x", members=["ada", "bob"], owner_id="olga")
    await collections.create("team-y", members=["carol"])  # the operator's
    documents = [
        record("a1", collection="team-x", minutes=1),
        record("a2", collection="team-x", minutes=2),
        record("a3", minutes=3),  # ada's private one
        record("b1", owner="bob", collection="team-x", minutes=4),
        record("c1", owner="carol", collection="team-y", minutes=5),
        record("s1", owner="ada", collection="shared", minutes=6),
    ]
    await store.add(documents, max_documents=10, max_bytes=1000)

    async def ids(user: str, **page: Any) -> tuple[list[str], int]:
        found, total = await store.list_readable(user, **{"limit": 10, **page})
        return [document.id for document in found], total

    assert await ids("bob") == (["s1", "b1", "a2", "a1"], 4)
    assert await ids("bob", limit=2, offset=1) == (["b1", "a2"], 4)  # paged in the query: the total counts right
    assert await ids("ada") == (["s1", "b1", "a3", "a2", "a1"], 5)
    assert await ids("olga") == (["s1", "b1", "a2", "a1"], 4)  # the owner reads the collection
    assert await ids("carol") == (["s1", "c1"], 2)
    assert await ids("eve") == (["s1"], 1)
    await store.update("a1", status="ready")
    assert await ids("bob", status="ready") == (["a1"], 1)

    assert (await store.get_for("bob", "a1")).owner == "ada"
    for user, document_id in (("carol", "a1"), ("bob", "a3"), ("eve", "c1"), ("bob", "missing")):
        with pytest.raises(DocumentNotFoundError):
            await store.get_for(user, document_id)
        with pytest.raises(DocumentNotFoundError):
            await store.get_to_change(user, document_id)
    assert (await store.get_to_change("ada", "a1")).id == "a1"
    assert (await store.get_to_change("olga", "b1")).id == "b1"  # the collection's owner
    for user, document_id in (("bob", "a1"), ("ada", "b1"), ("carol", "s1"), ("bob", "s1")):
        with pytest.raises(DocumentForbiddenError, match="only they"):
            await store.get_to_change(user, document_id)

    await collections.change_members("team-x", remove=["bob"])
    assert await ids("bob") == (["s1", "b1"], 2)  # at once; his own upload stays his
    with pytest.raises(DocumentNotFoundError):
        await store.get_for("bob", "a1")


def page_route(request: Request) -> Reply:
    if request.path == "/moved":
        return Reply(302, headers={"Location": "/guide.html"})
    if request.path == "/guide.html":
        html = "<html><head><title>Testing guide</title></head><body><h1>Guide</h1><p>Zorblax reruns.</p></body></html>"
        return Reply.text(html, content_type="text/html")
    if request.path == "/internal":
        return Reply(302, headers={"Location": "http://169.254.169.254/latest/meta-data"})
    return Reply.text("not found", status=404)


async def test_documents_from_urls_go_through_the_address_policy(tmp_path: Path) -> None:
    with LoopbackServer(page_route) as server:
        settings = settings_for(tmp_path / "open", allow=["127.0.0.1"])
        async with library_service(settings) as service, service.client() as client:
            ada = service.auth("ada")
            response = await client.post("/v1/documents", json={"urls": [f"{server.url}/moved"]}, headers=ada)
            assert response.status_code == 202, response.text
            (document,) = response.json()["documents"]
            assert document["filename"] == "guide.html"
            assert document["source_url"] == f"{server.url}/guide.html"
            await service.app.state.service.library.wait_idle()
            assert (await client.get(f"/v1/documents/{document['id']}", headers=ada)).json()["status"] == "ready"
            for path, reason in (("/missing", "HTTP 404"), ("/internal", "169.254.169.254")):
                refused = await client.post("/v1/documents", json={"urls": [server.url + path]}, headers=ada)
                assert refused.status_code == 422 and reason in refused.json()["detail"]
        async with library_service(settings_for(tmp_path / "default")) as service, service.client() as client:
            ada = service.auth("ada")
            refused = await client.post("/v1/documents", json={"urls": [f"{server.url}/guide.html"]}, headers=ada)
            assert refused.status_code == 422 and "RESEARCHCREW_DOCUMENTS__ALLOW" in refused.text
            assert "127.0.0.1" in refused.json()["detail"]
            assert (await client.get("/v1/documents", headers=ada)).json()["total"] == 0
    assert len(server.requests_to("/guide.html")) == 1  # the refused fetch never left the service


async def test_a_store_failure_part_way_leaves_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = KnowledgeBase.add_documents

    def fail_after_writing(self: KnowledgeBase, documents: Any, **options: Any) -> Any:
        original(self, documents[:1], **options)  # the first record's chunks are in Milvus
        raise KnowledgeBaseError("insert on collection 'researchcrew' failed: disk full")

    lines = "".join(f'{{"_id": "r{n}", "title": "Record {n}", "text": "Zorblax record {n}."}}\n' for n in range(5))
    async with library_service(settings_for(tmp_path)) as service, service.client() as client:
        ada = service.auth("ada")
        monkeypatch.setattr(KnowledgeBase, "add_documents", fail_after_writing)
        response = await upload(client, ada, ("records.jsonl", lines.encode(), "application/x-ndjson"))
        document = response.json()["documents"][0]
        assert document["records"] == 5
        await service.app.state.service.library.wait_idle()
        failed = (await client.get(f"/v1/documents/{document['id']}", headers=ada)).json()
        assert failed["status"] == "failed" and "disk full" in failed["error"] and failed["chunks"] == 0
        assert await chunk_count(service) == 0
        monkeypatch.setattr(KnowledgeBase, "add_documents", original)
        assert (await client.post(f"/v1/documents/{document['id']}/reindex", headers=ada)).status_code == 202
        await service.app.state.service.library.wait_idle()
        ready = (await client.get(f"/v1/documents/{document['id']}", headers=ada)).json()
        assert ready["status"] == "ready" and ready["error"] is None and await chunk_count(service) == ready["chunks"]


async def test_queued_documents_are_ingested_after_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(tmp_path)
    started = asyncio.Event()

    def never_done(self: KnowledgeBase, documents: Any, *, progress: Any = None, collection: str = "") -> Any:
        started.set()
        while True:  # stopped through the progress callback, as a long ingestion is when the service stops
            progress(0, len(documents))
            time.sleep(0.02)

    async with library_service(settings) as service, service.client() as client:
        monkeypatch.setattr(KnowledgeBase, "add_documents", never_done)
        document = (await upload(client, service.auth("ada"), ("a.md", NOTES.encode(), "text/markdown"))).json()
        await asyncio.wait_for(started.wait(), 30)
    monkeypatch.undo()
    async with library_service(settings) as service, service.client() as client:
        ada = service.auth("ada")
        (queued,) = document["documents"]
        await service.app.state.service.library.wait_idle()
        again = (await client.get(f"/v1/documents/{queued['id']}", headers=ada)).json()
        assert again["status"] == "ready" and again["chunks"] >= 1


async def test_events_follow_an_ingestion(tmp_path: Path) -> None:
    async with library_service(settings_for(tmp_path)) as service, service.client() as client:
        ada = service.auth("ada")
        response = await upload(client, ada, ("a.md", NOTES.encode(), "text/markdown"))
        document_id = response.json()["documents"][0]["id"]
        async with client.stream("GET", f"/v1/documents/{document_id}/events", headers=ada) as stream:
            statuses = [line async for line in stream.aiter_lines() if line.startswith("data: ")]
        assert '"ready"' in statuses[-1]
        assert all('"status":"ingesting"' in line or '"status":"queued"' in line for line in statuses[:-1])
