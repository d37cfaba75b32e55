"""``/v1/collections``: a user makes a named collection and owns it; members read it but may not change it; anyone
else is told it does not exist; errors are problem+json."""

from __future__ import annotations

import asyncio

import httpx

from researchcrew.knowledge.documents import Document
from tests.service.support import ServiceHarness


def _problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert isinstance(body, dict) and body["status"] == status
    return body


async def test_owner_members_and_strangers(service: ServiceHarness, client: httpx.AsyncClient) -> None:
    await service.add_user("eve")
    ada, bob, eve = service.auth("ada"), service.auth("bob"), service.auth("eve")
    made = await client.post("/v1/collections", headers=ada, json={"name": "lab", "members": ["bob"]})
    assert made.status_code == 201, made.text
    assert made.json() | {"created_at": None} == {
        "name": "lab",
        "kind": "named",
        "owner_id": "ada",
        "members": ["bob"],
        "created_at": None,
    }
    listed = (await client.get("/v1/collections", headers=bob)).json()["collections"]
    assert [item["name"] for item in listed] == ["shared", "user:bob", "lab"]
    assert [item["name"] for item in (await client.get("/v1/collections", headers=eve)).json()["collections"]] == [
        "shared",
        "user:eve",
    ]
    assert (await client.get("/v1/collections/lab", headers=bob)).json()["members"] == ["bob"]
    assert _problem(await client.get("/v1/collections/lab", headers=eve), 404)["type"].endswith("collection-not-found")
    # A member reads but may not change; a stranger is not told the collection exists.
    change = {"add": ["eve"]}
    _problem(await client.patch("/v1/collections/lab/members", headers=bob, json=change), 403)
    _problem(await client.patch("/v1/collections/lab/members", headers=eve, json=change), 404)
    _problem(await client.delete("/v1/collections/lab", headers=bob), 403)
    changed = await client.patch("/v1/collections/lab/members", headers=ada, json={"add": ["eve"], "remove": ["bob"]})
    assert changed.json()["members"] == ["eve"]
    assert "lab" not in [
        item["name"] for item in (await client.get("/v1/collections", headers=bob)).json()["collections"]
    ]


async def test_bad_requests(service: ServiceHarness, client: httpx.AsyncClient) -> None:
    ada = service.auth("ada")
    for name in ("shared", "user:ada", "Bad Name"):
        _problem(await client.post("/v1/collections", headers=ada, json={"name": name}), 422)
    assert (await client.post("/v1/collections", headers=ada, json={"name": "lab"})).status_code == 201
    _problem(await client.post("/v1/collections", headers=service.auth("bob"), json={"name": "lab"}), 409)
    _problem(await client.delete("/v1/collections/shared", headers=ada), 403)
    _problem(await client.patch("/v1/collections/user:ada/members", headers=ada, json={"add": ["bob"]}), 403)
    _problem(await client.delete("/v1/collections/Not%20A%20Name", headers=ada), 404)
    _problem(await client.get("/v1/collections"), 401)
    _problem(await client.post("/v1/collections", headers=ada, json={"name": "x", "owner_id": "bob"}), 422)


async def test_removing_a_collection_removes_its_documents(service: ServiceHarness, client: httpx.AsyncClient) -> None:
    ada = service.auth("ada")
    assert (await client.post("/v1/collections", headers=ada, json={"name": "lab"})).status_code == 201
    knowledge_base = await service.runtime.knowledge_base()
    document = Document(source_key="lab/a.md", title="A", text="Glaciers carve U-shaped valleys.")
    await asyncio.to_thread(knowledge_base.add_documents, [document], collection="lab")
    await asyncio.to_thread(knowledge_base.add_documents, [document])  # the same file in shared stays
    assert (await client.delete("/v1/collections/lab", headers=ada)).status_code == 204
    assert await asyncio.to_thread(knowledge_base.document_index, "lab") == {}
    assert await asyncio.to_thread(knowledge_base.document_index, "shared") == {"lab/a.md": document.doc_id}
    _problem(await client.get("/v1/collections/lab", headers=ada), 404)
