"""The HTTP doors of answer tables (issue 22 item 4): a session message answered with a table, then
``GET /v1/sessions/{id}/tables/{table_id}`` as a JSON page and as a CSV attachment (formula cells guarded), 404 as
problem+json for another user's session or table, "show the rest" as a message, and the OpenAI-compatible route's
answer with the table as Markdown text."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from researchcrew.assistant import ResearchAssistant
from researchcrew.client import ServiceClient
from researchcrew.contracts.tables import AnswerTable, TableColumn, TableRow
from researchcrew.errors import ResearchCrewError
from researchcrew.memory.store import MemoryStore
from researchcrew.settings import ServiceSettings, Settings
from tests.deep.corpus import CorpusTool
from tests.service.support import running_service
from tests.tables.support import PANELS_QUESTION, FixedStage


async def test_tables_over_http(tmp_path: Path, memory: MemoryStore) -> None:
    settings = Settings(data_dir=tmp_path, service=ServiceSettings())
    async with (
        running_service(
            settings, tools=[CorpusTool()], memory_store=memory, remember=False, structured=FixedStage()
        ) as service,
        service.client() as http,
    ):
        ada, bob = service.auth("ada"), service.auth("bob")
        s1 = (await http.post("/v1/sessions", headers=ada, json={})).json()["session_id"]
        asked = await http.post(f"/v1/sessions/{s1}/messages", headers=ada, json={"question": PANELS_QUESTION})
        assert asked.status_code == 200, asked.text
        answer = asked.json()
        table_id = answer["table"]["table_id"]
        assert answer["route"]["route"] == "structured" and answer["table"]["total_rows"] == 23
        assert all(isinstance(row["citation"], int) for row in answer["table"]["rows"])

        url = f"/v1/sessions/{s1}/tables/{table_id}"
        page = await http.get(url, headers=ada, params={"offset": 20, "limit": 5})
        assert page.status_code == 200
        read = AnswerTable.model_validate(page.json())
        assert (read.offset, read.total_rows) == (20, 23)
        assert [row.values[0] for row in read.rows] == ["SP-21", "SP-22", "SP-23"]

        csv = await http.get(url, headers=ada, params={"format": "csv"})
        assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
        assert csv.headers["content-disposition"] == f'attachment; filename="table-{table_id}.csv"'
        assert len(csv.text.splitlines()) == 24 and csv.text.startswith('"Panel","Width (m)","document"')

        elsewhere = (bob, url), (ada, f"/v1/sessions/s2/tables/{table_id}"), (ada, f"/v1/sessions/{s1}/tables/nope")
        for headers, path in elsewhere:
            missing = await http.get(path, headers=headers)
            assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
            assert missing.json()["type"].endswith("table-not-found")
        assert (await http.get(url, headers=ada, params={"limit": 0})).status_code == 422
        assert (await http.get(url, headers=ada, params={"format": "xlsx"})).status_code == 422

        # The SDK through the service (service_url): the same page and CSV, and another user's table not found.
        for key, user in ((ada, "ada"), (bob, "bob")):
            api_key = key["Authorization"].split()[1]
            sdk = ResearchAssistant(service_url="http://service.test", api_key=api_key)
            # The client the SDK builds for service_url, on the app in this process instead of a socket.
            in_process = httpx.ASGITransport(service.app)
            sdk._client = ServiceClient("http://service.test", api_key=api_key, transport=in_process)
            try:
                if user == "bob":
                    with pytest.raises(ResearchCrewError, match="table"):
                        await sdk.table(s1, table_id, user_id=user)
                    continue
                remote = await sdk.table(s1, table_id, offset=20, limit=5, user_id=user)
                assert [row.values[0] for row in remote.rows] == ["SP-21", "SP-22", "SP-23"]
                assert await sdk.export_table(s1, table_id, user_id=user) == csv.text
            finally:
                await sdk.aclose()

        rest = await http.post(f"/v1/sessions/{s1}/messages", headers=ada, json={"question": "show the rest"})
        assert rest.status_code == 200 and "Rows 11–20 of 23" in rest.json()["answer"]

        # A cell a spreadsheet would run is exported as text.
        hostile = AnswerTable(
            columns=[TableColumn(name="=cmd|' /C calc'!A0"), TableColumn(name="Total", kind="number")],
            rows=[TableRow(values=['=HYPERLINK("http://evil.example","x")', -3.5], document="@SUM(A1)")],
            total_rows=1,
        )
        store = await service.runtime.memory_store()
        await store.save_answer_table(
            user_id="ada", session_id="s3", response_id="r3", question="q", table=hostile, rows=hostile.rows
        )
        guarded = await http.get(f"/v1/sessions/s3/tables/{hostile.table_id}", headers=ada, params={"format": "csv"})
        assert guarded.text.splitlines() == [
            '"\'=cmd|\' /C calc\'!A0","Total","document","location","citation"',
            '"\'=HYPERLINK(""http://evil.example"",""x"")","-3.5","\'@SUM(A1)","",""',
        ]

        chat = await http.post(
            "/v1/chat/completions",
            headers=ada,
            json={
                "model": "researchcrew",
                "messages": [{"role": "user", "content": PANELS_QUESTION}],
                "metadata": {"session_id": "chat-1"},
            },
        )
        assert chat.status_code == 200, chat.text
        content = chat.json()["choices"][0]["message"]["content"]
        assert "| Panel | Width (m) | Source |" in content and "| SP-01 | 1.01 |" in content
        assert "13 more rows — say 'show the rest' or 'export that table'." in content
        more = await http.post(
            "/v1/chat/completions",
            headers=ada,
            json={
                "model": "researchcrew",
                "messages": [
                    {"role": "user", "content": PANELS_QUESTION},
                    {"role": "assistant", "content": content},
                    {"role": "user", "content": "export that table"},
                ],
                "metadata": {"session_id": "chat-1"},
            },
        )
        assert more.status_code == 200 and "```csv" in more.json()["choices"][0]["message"]["content"]
