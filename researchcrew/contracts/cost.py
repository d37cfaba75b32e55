"""What an answer's LLM calls cost, in US dollars (issue 23): per stage and in total, or "price unknown".

Tokens are what the provider counted (``TokenUsage``); the price per token comes from a bundled, offline price table
(``llm/pricing.py``) or from prices the user set for a model the table does not know. A model nobody priced is
``usd=None`` with ``priced=False`` — never 0, which would read as "free". No LLM call at all costs exactly 0.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from researchcrew.contracts._base import Contract
from researchcrew.contracts.follow_up import USAGE_STAGES, UsageStage


class AnswerCost(Contract):
    """The price of the tokens behind one answer (or one deep run), per stage and in total."""

    model_config = ConfigDict(frozen=True)

    model: str | None = Field(default=None, description="The model whose prices were used; None: no LLM was called.")
    priced: bool = Field(
        default=True, description="Every token counted had a price. False: `usd` is None and the cost is unknown."
    )
    usd: float | None = Field(
        default=0.0, ge=0, description="Total cost in US dollars; None when the price is unknown."
    )
    stages: dict[UsageStage, float | None] = Field(
        default_factory=dict,
        description="Cost per LLM stage in US dollars (stages without tokens are left out); None: price unknown.",
    )
    price_source: str | None = Field(
        default=None,
        description="Where the prices came from: the bundled price table (with its version) or the user's settings.",
    )

    @model_validator(mode="after")
    def _unknown_is_not_zero(self) -> AnswerCost:
        if self.priced != (self.usd is not None):
            raise ValueError("usd is None exactly when the cost is not priced")
        unknown = [stage for stage, usd in self.stages.items() if usd is None]
        if unknown and self.priced:
            raise ValueError(f"stages {unknown} have no price, so the total cannot be priced")
        return self

    @classmethod
    def unpriced(cls, model: str | None, stages: list[UsageStage]) -> AnswerCost:
        return cls(model=model, priced=False, usd=None, stages=dict.fromkeys(stages))

    def summary(self) -> str:
        """One line for people: "$0.000450 (gpt-4o-mini)", "price unknown (my-model)", "$0 (no LLM calls)"."""
        if self.usd is None:
            return f"price unknown ({self.model or 'unknown model'})"
        if self.model is None or (self.usd == 0 and not self.stages):
            return "$0 (no LLM calls)"
        return f"${self.usd:.6f} ({self.model})"

    def __add__(self, other: AnswerCost) -> AnswerCost:
        """The cost of two parts together (a deep run's sub-questions): unknown if either part is unknown."""
        stages: dict[UsageStage, float | None] = {}
        for stage in USAGE_STAGES:
            if stage in self.stages or stage in other.stages:
                mine, theirs = self.stages.get(stage, 0.0), other.stages.get(stage, 0.0)
                stages[stage] = None if mine is None or theirs is None else mine + theirs
        models = {model for model in (self.model, other.model) if model}
        priced = self.priced and other.priced
        return AnswerCost(
            model=", ".join(sorted(models)) or None,
            priced=priced,
            usd=(self.usd or 0.0) + (other.usd or 0.0) if priced else None,
            stages=stages,
            price_source=self.price_source or other.price_source,
        )


NO_LLM_COST = AnswerCost()

__all__ = ["NO_LLM_COST", "AnswerCost"]
