"""The monthly budget holds at the MCP door too: past it, ``ask`` and ``research`` are tool errors with the same one
line as the HTTP routes' 402; another user is not affected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.types import TextContent

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.follow_up import TokenCount
from tests.deep.corpus import CorpusTool
from tests.mcp.support import http_session, mcp_service


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


async def test_past_the_monthly_budget_ask_and_research_are_refused_as_tool_errors(tmp_path: Path) -> None:
    with mcp_service(tmp_path, [CorpusTool()], monthly_budget_usd=0.01) as service:
        runtime = service.app.state.service.runtime

        async def spend() -> None:
            ledger = await runtime.usage_ledger()
            spent = AnswerCost(model="gpt-4o-mini", usd=0.02, stages={"synthesis": 0.02})
            await ledger.record(user_id="ada", kind="answer", response_id="r1", tokens=TokenCount.of(9, 9), cost=spent)

        service.server.run_in_loop(spend())
        async with http_session(service.url, service.auth("ada")) as ada:
            asked = await ada.call_tool("ask", {"question": "How does pooled testing save tests?"})
            researched = await ada.call_tool("research", {"question": "What is known about pooled testing?"})
        async with http_session(service.url, service.auth("bob")) as bob:
            answered = await bob.call_tool("ask", {"question": "How does pooled testing save tests?"})

    for refused in (asked, researched):
        assert refused.isError and "RESEARCHCREW_SERVICE__MONTHLY_BUDGET_USD" in text_of(refused)
        assert "$0.01" in text_of(refused) and "\n" not in text_of(refused)
    assert not answered.isError, text_of(answered)
