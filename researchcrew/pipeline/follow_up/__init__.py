"""The follow-up stage: before retrieval, a question that only points back at the conversation ("What are its
limitations?", "And in Python?") is rewritten into one that stands alone, from the session's rolling summary.

With an LLM configured, ``llm.llm_rewriter`` asks the model (one short fenced call under a timeout) and falls back
to the rule on any failure; without one, ``rule.rule_rewrite`` carries the previous question's subject in. A
question that already stands alone passes unchanged either way (the LLM is not even asked). ``session`` keeps the
rolling summary the rewrite reads; the Memory stage updates it after every exchange.
"""

from researchcrew.pipeline.follow_up._base import (
    FollowUpRewriter,
    Rewrite,
    SessionContextLoader,
    no_session_context,
    unchanged,
)
from researchcrew.pipeline.follow_up._rule import rule_rewrite

__all__ = [
    "FollowUpRewriter",
    "Rewrite",
    "SessionContextLoader",
    "no_session_context",
    "rule_rewrite",
    "unchanged",
]
