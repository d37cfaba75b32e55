"""Prices for the tokens an answer's LLM stages spent (issue 23), offline.

The price table is ``genai-prices`` (Pydantic's): a price list of the providers' models bundled with the package and
read from disk — no network (its auto-update is never started), kept current by upgrading the package. Why not
litellm's cost map: crewAI 1.15 does not install litellm (it is an optional extra), and litellm brings boto3 and
seconds of import for one JSON file. A model the table does not know (a local Ollama or vLLM model, a fine-tune) is
"price unknown" unless the user gives its prices (``llm.input_usd_per_mtok`` / ``llm.output_usd_per_mtok``; 0 for a
model that is free to run).

``Pricing(settings.llm).cost(usage)`` prices one answer: the model's price is looked up once (``warm()``, run off the
event loop when the runtime starts) and each answer then costs a few multiplications.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from researchcrew.contracts.cost import NO_LLM_COST, AnswerCost
from researchcrew.contracts.follow_up import USAGE_STAGES, TokenCount, TokenUsage, UsageStage

if TYPE_CHECKING:
    from researchcrew.settings import LLMSettings

logger = logging.getLogger(__name__)

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class ModelPrice:
    """A model's price per million tokens, and where it came from. ``tiered`` holds genai-prices' own price object
    when the price depends on the number of tokens (then it computes each stage's price itself)."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    source: str
    tiered: Any = None

    def of(self, count: TokenCount) -> float:
        if self.tiered is not None:
            from genai_prices import Usage

            price = self.tiered.calc_price(
                Usage(input_tokens=count.prompt_tokens, output_tokens=count.completion_tokens)
            )
            return float(price["total_price"])
        cost = count.prompt_tokens * self.input_usd_per_mtok + count.completion_tokens * self.output_usd_per_mtok
        return float(cost / _MILLION)


class Pricing:
    """Prices answers for one configured model (see the module docstring). Thread-safe."""

    def __init__(
        self,
        model: str | None,
        *,
        base_url: str | None = None,
        input_usd_per_mtok: float | None = None,
        output_usd_per_mtok: float | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self._given = (input_usd_per_mtok, output_usd_per_mtok)
        self._price: ModelPrice | None = None
        self._looked_up = False
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> Pricing:
        return cls(
            settings.model,
            base_url=settings.base_url,
            input_usd_per_mtok=settings.input_usd_per_mtok,
            output_usd_per_mtok=settings.output_usd_per_mtok,
        )

    @property
    def label(self) -> str | None:
        """The model as the user named it, without the provider prefix crewAI routes by."""
        return _split(self.model)[1] if self.model else None

    def warm(self) -> ModelPrice | None:
        """Look the model's price up now (loads the price table: under a second, once per process)."""
        with self._lock:
            if not self._looked_up:
                self._price = self._look_up()
                self._looked_up = True
            return self._price

    def cost(self, usage: TokenUsage) -> AnswerCost:
        """What ``usage`` cost. No tokens at all: exactly 0 without a lookup."""
        spent: list[UsageStage] = [
            stage for stage in USAGE_STAGES if usage.stage(stage).calls or usage.stage(stage).total_tokens
        ]
        if not spent:
            return NO_LLM_COST if self.model is None else AnswerCost(model=self.label, usd=0.0)
        price = self.warm()
        if price is None:
            return AnswerCost.unpriced(self.label, spent)
        stages: dict[UsageStage, float | None] = {stage: price.of(usage.stage(stage)) for stage in spent}
        total = sum(value for value in stages.values() if value is not None)
        return AnswerCost(model=self.label, usd=total, stages=stages, price_source=price.source)

    def cost_of(self, count: TokenCount) -> AnswerCost:
        """What ``count`` tokens cost, not split by stage (a deep run's total: planning, sub-questions, report)."""
        if not (count.calls or count.total_tokens):
            return NO_LLM_COST if self.model is None else AnswerCost(model=self.label, usd=0.0)
        price = self.warm()
        if price is None:
            return AnswerCost(model=self.label, priced=False, usd=None)
        return AnswerCost(model=self.label, usd=price.of(count), price_source=price.source)

    def _look_up(self) -> ModelPrice | None:
        given_in, given_out = self._given
        if given_in is not None and given_out is not None:
            return ModelPrice(Decimal(str(given_in)), Decimal(str(given_out)), "settings (llm.*_usd_per_mtok)")
        if self.model is None:
            return None
        try:
            return _from_table(self.model, self.base_url)
        except LookupError as error:
            logger.info("no price for %s in the price table (%s): its cost is reported as unknown", self.model, error)
            return None


def _from_table(model: str, base_url: str | None) -> ModelPrice:
    import importlib.metadata

    from genai_prices import Usage, calc_price

    provider, name = _split(model)
    # With a base URL the model runs wherever that URL points: it is priced only if the URL is a known provider's.
    nothing = Usage(input_tokens=0, output_tokens=0)
    if base_url:
        found = calc_price(nothing, model_ref=name, provider_api_url=base_url)
    else:
        found = calc_price(nothing, model_ref=name, provider_id=provider)
    price = found.model_price
    source = f"genai-prices {importlib.metadata.version('genai-prices')} ({found.provider.id}/{found.model.id})"
    if isinstance(price.input_mtok, Decimal) and isinstance(price.output_mtok, Decimal):
        return ModelPrice(price.input_mtok, price.output_mtok, source)
    if price.input_mtok is None and price.output_mtok is None:
        raise LookupError(f"the price table lists {name} without token prices")
    return ModelPrice(Decimal(0), Decimal(0), source, tiered=price)


def _split(model: str) -> tuple[str | None, str]:
    """``openai/gpt-4o-mini`` → (``openai``, ``gpt-4o-mini``); a bare name has no provider."""
    provider, slash, name = model.partition("/")
    return (provider.lower(), name) if slash and name else (None, model)


__all__ = ["ModelPrice", "Pricing"]
