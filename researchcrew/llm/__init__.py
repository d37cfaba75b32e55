"""The language model: built from settings (``provider``), and the one way prompts fence untrusted text and
replies are parsed (``fence``, ``replies``)."""

from researchcrew.llm._provider import PLACEHOLDER_API_KEY, QUIET_CREWAI_ENVIRONMENT, build_llm, quiet_crewai

__all__ = ["PLACEHOLDER_API_KEY", "QUIET_CREWAI_ENVIRONMENT", "build_llm", "quiet_crewai"]
