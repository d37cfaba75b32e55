"""Failures are data a user may see: a tool's odd ToolError never breaks ``search()``'s never-raises contract, and
no credential (a URL's password, a token parameter, an Authorization value) reaches a failure message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchcrew.contracts.chunks import SourceFailure
from researchcrew.contracts.retriever import RetrieverInput
from researchcrew.errors import ToolError
from researchcrew.pipeline.retrieve import Retriever
from researchcrew.redaction import mask_url, redact
from tests.unit.fake_tools import FakeTool


class OddErrorTool(FakeTool):
    """Raises whatever ToolError it is given (kinds and statuses a careless tool author might use)."""

    def __init__(self, error: ToolError, **kwargs: Any) -> None:
        super().__init__("web", **kwargs)
        self.error = error

    async def _behave(self) -> None:
        raise self.error


class LeakyTool(FakeTool):
    """A tool whose driver put the connection URL, password included, into its exception."""

    async def _behave(self) -> None:
        raise ConnectionError("could not connect to postgresql://admin:hunter2@db.internal:5432/papers")


@pytest.mark.parametrize(
    ("kind", "status"),
    [("rate_limited", 429), ("", None), ("timeout", 1000), ("http_error", True), ("unreachable", "503")],
)
async def test_a_tool_error_with_an_unknown_kind_or_status_is_reported_not_raised(kind: Any, status: Any) -> None:
    tool = OddErrorTool(ToolError(kind, "the service said no", status_code=status), name="odd_search")

    result = await tool.search("q")  # must not raise pydantic's ValidationError

    assert result.failure is not None
    expected_kind = kind if kind in ("timeout", "http_error", "unreachable") else "internal_error"
    assert result.failure.kind == expected_kind
    assert "the service said no" in result.failure.message
    assert result.failure.status_code == (429 if status == 429 else None)  # only a real HTTP status is kept


async def test_a_tool_error_with_a_huge_or_non_text_message_is_reported() -> None:
    huge = await OddErrorTool(ToolError("bad_response", "x" * 50_000)).search("q")
    assert huge.failure is not None and len(huge.failure.message) <= 4_000
    odd = await OddErrorTool(ToolError("bad_response", {"detail": 1})).search("q")  # type: ignore[arg-type]
    assert odd.failure is not None and odd.failure.kind == "bad_response"


async def test_the_retriever_reports_an_odd_tool_error_raised_out_of_search() -> None:
    class RaisesOutOfSearch(FakeTool):
        async def search(self, query: str, *, timeout: float | None = None, **kwargs: Any) -> Any:  # noqa: ASYNC109
            raise ToolError("quota", "over quota", status_code=99)  # type: ignore[arg-type]

    output = await Retriever([RaisesOutOfSearch("web"), FakeTool("rag")]).run(
        RetrieverInput(query_text="q", user_id="u", session_id="s")
    )

    web = next(r for r in output.aggregated_context.source_reports if r.source_type == "web")
    assert web.failure is not None
    assert (web.failure.kind, web.failure.status_code) == ("internal_error", None)
    assert output.retrieval_status == "partial"


async def test_an_unexpected_exception_shows_its_kind_not_its_text(caplog: pytest.LogCaptureFixture) -> None:
    result = await LeakyTool("rag", name="pg_search").search("q")

    assert result.failure is not None
    assert result.failure.kind == "internal_error"
    assert "hunter2" not in result.failure.message
    assert "db.internal" not in result.failure.message  # the text is not shown at all, only its type
    assert result.failure.message == "pg_search failed unexpectedly (ConnectionError); the details are in the log"
    assert any(record.exc_info for record in caplog.records)  # the detail is kept in the log


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("connect on collection 'k' at http://root:Milvus-pass@milvus:19530 failed", "Milvus-pass"),
        ("GET https://api.example.org/search?q=x&api_key=sk-abcdef123 -> 401", "sk-abcdef123"),
        ("request sent with Authorization: Bearer fc-0123456789abcdef", "fc-0123456789abcdef"),
        ("Zep said: invalid Api-Key zep_secret_value_1", "zep_secret_value_1"),
        ("postgresql+asyncpg://ada:s3cr%40t@db/x unreachable", "s3cr%40t"),
    ],
)
def test_a_failure_message_masks_credentials(text: str, secret: str) -> None:
    failure = SourceFailure(kind="unreachable", message=text)
    assert secret not in failure.message
    assert "***" in failure.message


def test_mask_url_keeps_everything_but_the_secret() -> None:
    assert mask_url("http://root:pw@milvus:19530/db") == "http://root:***@milvus:19530/db"
    assert mask_url("http://milvus:19530") == "http://milvus:19530"
    assert mask_url("/data/knowledge.db") == "/data/knowledge.db"
    assert mask_url("https://h/x?token=abc&page=2") == "https://h/x?token=***&page=2"


def test_known_secret_values_are_masked_anywhere() -> None:
    assert redact("the key fc-123456 was refused", secrets=["fc-123456", ""]) == "the key *** was refused"


@given(password=st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=30))
def test_no_url_password_survives_redaction(password: str) -> None:
    text = f"failed: http://user:{password}@host:1/x and more"
    assert f":{password}@" not in redact(text)
