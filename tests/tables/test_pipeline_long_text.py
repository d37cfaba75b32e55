"""The quick pipeline on the long-text route (issue 22 item 2): the passages of the sections whose summaries
matched join the retrieval's evidence and are cited; when no summary matched, the route says plain retrieval
answered. Extractive path (no LLM), the real citation check."""

from __future__ import annotations

from researchcrew.contracts import ProgressEvent
from researchcrew.contracts.request import ResearchRequest
from researchcrew.contracts.tables import RouteDecision, StructuredOutcome, StructuredRequest
from researchcrew.pipeline.flow import run_question
from researchcrew.testing.stages import ScriptedRetriever, relevant_chunk
from tests.tables.test_pipeline_tables import stages

WINTER = (
    "Snow on the panel stops charging completely; a steep tilt of sixty degrees lets it slide off by itself. "
    "Cold batteries deliver less current, so the enclosure is insulated with foam panels over the winter."
)
OTHER = "The station's modem sends readings once an hour over the cellular network."


class LongTextStage:
    """A stage that took the long-text route and found (or did not find) a matching section's passage."""

    def __init__(self, *, matched: bool) -> None:
        self.matched = matched
        self.requests: list[StructuredRequest] = []

    async def run(self, request: StructuredRequest, /) -> StructuredOutcome:
        self.requests.append(request)
        route = RouteDecision(
            route="long_text",
            intent="conceptual",
            fallbacks=["hybrid"],
            reason="a conceptual question: passages answer it",
            tried=["long_text"] if self.matched else ["long_text", "retrieval"],
        )
        if not self.matched:
            return StructuredOutcome(route=route)
        passage = relevant_chunk("manual:winter", 0.8, WINTER)
        passage.metadata.update({"heading": "Winter operation", "long_text": True})
        return StructuredOutcome(route=route, evidence=[passage])


def ask(question: str) -> ResearchRequest:
    return ResearchRequest(question=question, user_id="ada", session_id="s1")


async def test_the_matching_sections_passages_join_the_evidence_and_are_cited() -> None:
    retriever = ScriptedRetriever([relevant_chunk("modem", 0.7, OTHER)])
    events: list[ProgressEvent] = []
    response = await run_question(
        stages(LongTextStage(matched=True), retriever),
        ask("How do snow and cold affect the panel and batteries in winter?"),
        on_event=events.append,
    )
    assert len(retriever.requests) == 1  # short documents have no summaries: the ordinary search still runs
    assert response.route is not None and (response.route.route, response.route.tried) == ("long_text", ["long_text"])
    [retrieved] = [event for event in events if event.stage == "retrieve" and event.status == "finished"]
    assert retrieved.detail["chunks"] == 2
    [routed] = [event for event in events if event.stage == "route" and event.status == "finished"]
    assert routed.detail["long_text_passages"] == 1
    assert "manual:winter" in {citation.chunk_id for citation in response.citations}


async def test_no_matching_summary_leaves_plain_retrieval() -> None:
    retriever = ScriptedRetriever([relevant_chunk("modem", 0.7, OTHER)])
    events: list[ProgressEvent] = []
    response = await run_question(
        stages(LongTextStage(matched=False), retriever), ask("How are readings sent?"), on_event=events.append
    )
    assert response.route is not None and response.route.tried == ["long_text", "retrieval"]
    [retrieved] = [event for event in events if event.stage == "retrieve" and event.status == "finished"]
    assert retrieved.detail["chunks"] == 1
    assert {citation.chunk_id for citation in response.citations} <= {"modem"}
