"""One deadline and one token budget for a whole deep run, shared by every phase and sub-question.

Time is research time: it runs while a process works on the run and stops while the run waits for the user, so a
plan approved the next morning still gets the whole deadline. Each working segment (the start, each resume) adds
its wall time to what earlier segments spent, which travels in the Flow state.

Tokens are what the run's LLM reports (crewAI's ``get_token_usage_summary``, fed by the provider's usage figures;
the test double estimates them). The runtime gives each deep run its own LLM object when it builds the LLM from
settings, so the count is the run's own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from researchcrew.contracts.cost import AnswerCost
from researchcrew.contracts.deep import BudgetReport
from researchcrew.contracts.follow_up import TokenCount

if TYPE_CHECKING:
    from crewai import BaseLLM

    from researchcrew.llm.pricing import Pricing

Exhausted = Literal["deadline", "tokens"]


def llm_tokens(llm: BaseLLM | None) -> int:
    """Tokens ``llm`` has used over its lifetime (0 without an LLM or usage figures)."""
    if llm is None:
        return 0
    summary = getattr(llm, "get_token_usage_summary", None)
    if summary is None:
        return 0
    return int(getattr(summary(), "total_tokens", 0) or 0)


def llm_token_count(llm: BaseLLM | None) -> TokenCount:
    """Prompt and completion tokens ``llm`` has used over its lifetime (zeros without an LLM or usage figures)."""
    summary = getattr(llm, "get_token_usage_summary", None) if llm is not None else None
    if summary is None:
        return TokenCount()
    metrics = summary()
    prompt = int(getattr(metrics, "prompt_tokens", 0) or 0)
    completion = int(getattr(metrics, "completion_tokens", 0) or 0)
    return TokenCount.of(max(0, prompt), max(0, completion), calls=int(getattr(metrics, "successful_requests", 0) or 0))


@dataclass
class Budget:
    """The run's budget as seen by one working segment."""

    deadline_s: float
    token_budget: int | None
    spent_s: float = 0.0  # research time of earlier segments
    tokens_before: int = 0  # tokens of earlier segments
    llm: BaseLLM | None = None
    started: float = field(default_factory=time.monotonic)
    llm_start: int = 0
    count_before: TokenCount = field(default_factory=TokenCount)  # prompt/completion split of earlier segments
    pricing: Pricing | None = None
    count_start: TokenCount = field(default_factory=TokenCount)

    def __post_init__(self) -> None:
        self.llm_start = llm_tokens(self.llm)
        self.count_start = llm_token_count(self.llm)

    def token_count(self) -> TokenCount:
        """Prompt and completion tokens of the whole run so far (earlier segments included)."""
        now = llm_token_count(self.llm)
        return self.count_before + TokenCount.of(
            max(0, now.prompt_tokens - self.count_start.prompt_tokens),
            max(0, now.completion_tokens - self.count_start.completion_tokens),
            calls=max(0, now.calls - self.count_start.calls),
        )

    def elapsed_s(self) -> float:
        return self.spent_s + (time.monotonic() - self.started)

    def remaining_s(self) -> float:
        return self.deadline_s - self.elapsed_s()

    def tokens_used(self) -> int:
        return self.tokens_before + max(0, llm_tokens(self.llm) - self.llm_start)

    def tokens_left(self) -> int | None:
        if self.token_budget is None or self.llm is None:
            return None
        return self.token_budget - self.tokens_used()

    def exhausted(self, *, reserve_s: float = 0.0) -> Exhausted | None:
        """Which limit is reached (keeping ``reserve_s`` seconds back for what must still happen), or None."""
        if self.remaining_s() <= reserve_s:
            return "deadline"
        left = self.tokens_left()
        if left is not None and left <= 0:
            return "tokens"
        return None

    def report(self, exhausted: Exhausted | None = None) -> BudgetReport:
        return BudgetReport(
            deadline_s=self.deadline_s,
            elapsed_s=round(self.elapsed_s(), 3),
            token_budget=self.token_budget if self.llm is not None else None,
            tokens_used=self.tokens_used(),
            prompt_tokens=(count := self.token_count()).prompt_tokens,
            completion_tokens=count.completion_tokens,
            exhausted=exhausted,
            cost=self.pricing.cost_of(self.token_count()) if self.pricing is not None else AnswerCost(),
        )
