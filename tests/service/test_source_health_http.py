"""``/readyz`` shows each source's health (issue 20 item 6): healthy, or backing off after a failure — until when,
the failure's kind and its message with credentials masked — while the process stays ready."""

from __future__ import annotations

from pathlib import Path

from researchcrew.testing import FakeTool
from tests.service.support import QUESTION, running_service, service_settings


async def test_readyz_shows_a_source_backing_off_after_it_failed_and_stays_ready(tmp_path: Path) -> None:
    down = FakeTool(
        "arxiv", name="academic_search", fail_with=("unreachable", "cannot reach http://ada:s3cret@127.0.0.1:9/api")
    )
    tools = [FakeTool("rag"), down]
    async with running_service(service_settings(tmp_path), tools=tools) as service, service.client() as client:
        before = (await client.get("/readyz")).json()
        assert [(s["name"], s["status"]) for s in before["source_health"]] == [
            ("rag_fake", "healthy"),
            ("academic_search", "healthy"),
        ]
        session = await client.post("/v1/sessions", headers=service.auth("ada"), json={})
        session_id = session.json()["session_id"]
        reply = await client.post(
            f"/v1/sessions/{session_id}/messages", headers=service.auth("ada"), json={"question": QUESTION}
        )
        assert reply.status_code == 200, reply.text

        response = await client.get("/readyz")
        ready = response.json()
    assert response.status_code == 200 and ready["ready"] is True  # a source backing off is not unreadiness
    health = {state["name"]: state for state in ready["source_health"]}
    arxiv = health["academic_search"]
    assert arxiv["source_type"] == "arxiv" and arxiv["status"] == "backing_off"
    assert arxiv["failures"] == 1 and arxiv["last_failure_kind"] == "unreachable"
    assert arxiv["retry_at"] > arxiv["last_failure_at"]
    assert "127.0.0.1:9" in arxiv["last_failure_message"] and "s3cret" not in response.text
    assert health["rag_fake"]["status"] == "healthy"
    assert down.started == 1
