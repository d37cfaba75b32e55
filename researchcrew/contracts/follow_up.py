"""What one answer reports about the conversation and the language model: how a follow-up question was made to
stand alone before it was researched (``QuestionRewrite``), and the tokens the LLM stages spent (``TokenUsage``).

Both are read by every door: the CLI prints them, the chat service shows the rewritten question in its stream and
session view and sums the tokens into an OpenAI-shaped ``usage``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from researchcrew.contracts._base import Contract

RewriteMethod = Literal["llm", "rule"]
UsageStage = Literal["follow_up", "routing", "reformulation", "adjudication", "synthesis"]
USAGE_STAGES: tuple[UsageStage, ...] = ("follow_up", "routing", "reformulation", "adjudication", "synthesis")


class QuestionRewrite(Contract):
    """A follow-up question rewritten from the session's recent exchanges into a question that stands alone."""

    original: str = Field(min_length=1, description="The question as the user asked it (what memory stores).")
    standalone: str = Field(
        min_length=1,
        max_length=4_000,
        description="The question as it was researched, e.g. 'What are its limitations?' after 'What is "
        "metamorphic testing?' → 'What are the limitations of metamorphic testing?'.",
    )
    method: RewriteMethod = Field(
        description="llm: written by the configured language model; rule: the deterministic rule (no LLM, or the "
        "LLM failed, timed out or gave an unusable rewrite)."
    )
    reason: str = Field(
        default="", max_length=500, description="What was resolved, e.g. \"'its' → metamorphic testing\"."
    )


class TokenCount(Contract):
    """Tokens one stage's LLM calls reported, as the provider counted them."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = Field(default=0, ge=0, description="Tokens sent to the model (prompt, input).")
    completion_tokens: int = Field(default=0, ge=0, description="Tokens the model generated (completion, output).")
    total_tokens: int = Field(default=0, ge=0, description="prompt_tokens + completion_tokens.")
    calls: int = Field(default=0, ge=0, description="LLM calls that completed and were counted.")

    @model_validator(mode="after")
    def _total_adds_up(self) -> TokenCount:
        if self.total_tokens != self.prompt_tokens + self.completion_tokens:
            raise ValueError(
                f"total_tokens ({self.total_tokens}) must equal prompt_tokens + completion_tokens "
                f"({self.prompt_tokens} + {self.completion_tokens})"
            )
        return self

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int, calls: int = 1) -> TokenCount:
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            calls=calls,
        )

    def __add__(self, other: TokenCount) -> TokenCount:
        return TokenCount.of(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )


class TokenUsage(Contract):
    """The tokens the LLM stages spent on this answer, per stage; all zero when no LLM was called (an extractive
    answer without an LLM, a refusal). Entity extraction is not here: the Memory stage runs it in the background,
    after the answer has gone out. ``total`` is always the sum of the stages (filled in when not given)."""

    model_config = ConfigDict(frozen=True)

    follow_up: TokenCount = Field(
        default_factory=TokenCount, description="Rewriting a follow-up question into a stand-alone one."
    )
    routing: TokenCount = Field(
        default_factory=TokenCount, description="Choosing the retrieval route (the route prompt, issue 22)."
    )
    reformulation: TokenCount = Field(
        default_factory=TokenCount, description="Rewriting the search query when the evidence was weak."
    )
    adjudication: TokenCount = Field(
        default_factory=TokenCount, description="Checking suspected contradictions between sources."
    )
    synthesis: TokenCount = Field(default_factory=TokenCount, description="Writing the answer (and its repair).")
    total: TokenCount = Field(default_factory=TokenCount, description="The sum over the stages.")

    @model_validator(mode="before")
    @classmethod
    def _fill_total(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("total") is None:
            parts = [TokenCount.model_validate(data.get(stage) or {}) for stage in USAGE_STAGES]
            data = {**data, "total": sum(parts, TokenCount())}
        return data

    @model_validator(mode="after")
    def _total_is_the_sum(self) -> TokenUsage:
        expected = sum((self.stage(name) for name in USAGE_STAGES), TokenCount())
        if self.total != expected:
            raise ValueError(f"total {self.total} is not the sum of the stages {expected}")
        return self

    def stage(self, name: UsageStage) -> TokenCount:
        """The count of one stage by name."""
        count: TokenCount = getattr(self, name)
        return count

    @classmethod
    def from_stages(cls, counts: dict[UsageStage, TokenCount]) -> TokenUsage:
        return cls.model_validate({name: counts.get(name, TokenCount()) for name in USAGE_STAGES})


__all__ = ["USAGE_STAGES", "QuestionRewrite", "RewriteMethod", "TokenCount", "TokenUsage", "UsageStage"]
