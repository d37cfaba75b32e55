"""What an answer's tokens cost: priced from the bundled table, from the user's prices for a model the table does not
know, or "price unknown" — never 0 for an unknown model; exactly 0 without LLM calls."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from researchcrew.contracts.cost import NO_LLM_COST, AnswerCost
from researchcrew.contracts.follow_up import TokenCount, TokenUsage
from researchcrew.llm.pricing import Pricing
from researchcrew.settings import LLMSettings

# gpt-4o-mini in the bundled table: $0.15 per million prompt tokens, $0.60 per million completion tokens.
SYNTHESIS_ONLY = TokenUsage(synthesis=TokenCount.of(1_000, 500))
TWO_STAGES = TokenUsage(follow_up=TokenCount.of(200, 20), synthesis=TokenCount.of(1_000, 500))


def test_a_known_model_is_priced_per_stage_and_in_total() -> None:
    cost = Pricing("openai/gpt-4o-mini").cost(TWO_STAGES)
    assert cost.priced and cost.model == "gpt-4o-mini"
    assert cost.stages["synthesis"] == pytest.approx(1_000 * 0.15e-6 + 500 * 0.6e-6)
    assert cost.stages["follow_up"] == pytest.approx(200 * 0.15e-6 + 20 * 0.6e-6)
    assert cost.usd == pytest.approx(sum(v for v in cost.stages.values() if v is not None))
    assert set(cost.stages) == {"follow_up", "synthesis"}  # stages without tokens are left out
    assert cost.price_source is not None and cost.price_source.startswith("genai-prices")
    assert cost.summary() == f"${cost.usd:.6f} (gpt-4o-mini)"


def test_a_bare_model_name_is_found_without_its_provider() -> None:
    assert Pricing("gpt-4o-mini").cost(SYNTHESIS_ONLY).usd == pytest.approx(0.00045)


@pytest.mark.parametrize(
    ("model", "base_url"),
    [
        ("ollama/llama3.1", None),
        ("fake/scripted", None),
        ("my-finetune-v2", None),
        # The same name served by a local OpenAI-compatible server is not OpenAI's model at OpenAI's price.
        ("openai/gpt-4o-mini", "http://127.0.0.1:8000/v1"),
    ],
)
def test_a_model_without_a_price_is_unknown_never_zero(model: str, base_url: str | None) -> None:
    cost = Pricing(model, base_url=base_url).cost(SYNTHESIS_ONLY)
    assert cost.usd is None and not cost.priced
    assert cost.stages == {"synthesis": None}
    assert cost.summary().startswith("price unknown")


def test_the_user_prices_a_model_the_table_does_not_know() -> None:
    settings = LLMSettings(model="ollama/llama3.1", input_usd_per_mtok=0.0, output_usd_per_mtok=0.0)
    free = Pricing.from_settings(settings).cost(SYNTHESIS_ONLY)
    assert free.priced and free.usd == 0.0 and free.price_source == "settings (llm.*_usd_per_mtok)"
    settings = LLMSettings(model="my-finetune", input_usd_per_mtok=2.0, output_usd_per_mtok=8.0)
    assert Pricing.from_settings(settings).cost(SYNTHESIS_ONLY).usd == pytest.approx(1_000 * 2e-6 + 500 * 8e-6)


def test_no_llm_calls_cost_exactly_nothing_without_a_lookup() -> None:
    assert Pricing(None).cost(TokenUsage()) == NO_LLM_COST
    assert NO_LLM_COST.usd == 0.0 and NO_LLM_COST.summary() == "$0 (no LLM calls)"
    unknown_model = Pricing("my-finetune").cost(TokenUsage())
    assert unknown_model.usd == 0.0 and unknown_model.priced  # nothing was spent, whatever the price


def test_a_call_that_reported_no_tokens_still_needs_a_price() -> None:
    cost = Pricing("my-finetune").cost(TokenUsage(synthesis=TokenCount(calls=1)))
    assert cost.usd is None  # the provider said nothing: not known to be free


def test_costs_add_up_and_unknown_wins() -> None:
    a = Pricing("gpt-4o-mini").cost(SYNTHESIS_ONLY)
    total = a + a
    assert total.usd == pytest.approx(2 * 0.00045) and total.stages["synthesis"] == pytest.approx(0.0009)
    unknown = a + Pricing("my-finetune").cost(SYNTHESIS_ONLY)
    assert unknown.usd is None and unknown.stages["synthesis"] is None


def test_an_unknown_price_can_never_read_as_zero() -> None:
    with pytest.raises(ValidationError):
        AnswerCost(model="x", priced=False, usd=0.0)
    with pytest.raises(ValidationError):
        AnswerCost(model="x", priced=True, usd=1.0, stages={"synthesis": None})
