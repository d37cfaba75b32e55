"""Test doubles for researchcrew and for the apps built on it (the way pydantic-ai ships ``TestModel``).

* ``FakeLLM`` — a real ``crewai.BaseLLM`` with scripted replies, a call history and token usage reported like a
  provider's (``llm``);
* ``FakeTool`` and ``fake_chunk`` — a retrieval source with scripted chunks, delays and failures (``tools``);
* ``ScriptedRetriever``, ``PassThroughEvaluator``, ``CitingSynthesizer``, ``scripted_stages`` — stand-ins for
  the pipeline's stages (``stages``).

    from researchcrew import ResearchAssistant
    from researchcrew.testing import FakeLLM, FakeTool, fake_chunk

    llm = FakeLLM(['{"sections": [{"claims": [{"text": "It checks relations [1].", "citations": [1]}]}]}'])
    tool = FakeTool("rag", chunks=[fake_chunk("rag", 1, content="Metamorphic testing checks relations.")])
    async with ResearchAssistant(settings, tools=[tool], llm=llm, remember=False) as assistant:
        answer = await assistant.ask("What is metamorphic testing?")
"""

from researchcrew.testing.llm import FakeLLM, FakeLLMExhausted, LLMCall, estimate_tokens
from researchcrew.testing.stages import (
    CitingSynthesizer,
    PassThroughEvaluator,
    ScriptedRetriever,
    keep_citations,
    recording_memory,
    relevant_chunk,
    scripted_stages,
)
from researchcrew.testing.tools import FakeTool, fake_chunk

__all__ = [
    "CitingSynthesizer",
    "FakeLLM",
    "FakeLLMExhausted",
    "FakeTool",
    "LLMCall",
    "PassThroughEvaluator",
    "ScriptedRetriever",
    "estimate_tokens",
    "fake_chunk",
    "keep_citations",
    "recording_memory",
    "relevant_chunk",
    "scripted_stages",
]
