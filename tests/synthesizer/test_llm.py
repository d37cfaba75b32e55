"""LLM configuration: nothing without a model; crewAI's LLM routed as documented otherwise."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr

from researchcrew.errors import ConfigurationError
from researchcrew.llm import PLACEHOLDER_API_KEY, QUIET_CREWAI_ENVIRONMENT, build_llm, quiet_crewai
from researchcrew.settings import LLMSettings, Settings
from tests.loopback.openai import openai_server


def test_no_model_means_no_llm_and_no_request() -> None:
    with openai_server(["unused"]) as (server, service):
        assert build_llm(LLMSettings(base_url=f"{server.url}/v1", api_key=SecretStr("sk-test"))) is None
        assert build_llm(Settings().llm) is None
    assert server.requests == [] and service.remaining == 1


def test_an_openai_model_at_a_custom_base_url_uses_the_native_openai_client_with_our_options() -> None:
    llm = build_llm(
        LLMSettings(
            model="openai/qwen2.5-7b-instruct",
            base_url="http://127.0.0.1:9/v1",
            api_key=SecretStr("sk-local"),
            temperature=0.3,
            timeout_s=4.5,
            max_tokens=900,
            max_retries=0,
        )
    )
    assert llm is not None
    assert type(llm).__name__ == "OpenAICompletion"
    assert (llm.model, llm.base_url, llm.api_key, llm.temperature) == (
        "qwen2.5-7b-instruct",
        "http://127.0.0.1:9/v1",
        "sk-local",
        0.3,
    )
    assert (llm.timeout, llm.max_retries, llm.max_tokens) == (4.5, 0, 900)  # type: ignore[attr-defined]
    assert llm.additional_params == {}, "no option leaks into the request body"


def test_ollama_models_need_no_key_and_default_to_the_local_server() -> None:
    llm = build_llm(LLMSettings(model="ollama/llama3.1"))
    assert llm is not None and type(llm).__name__ == "OpenAICompatibleCompletion"
    assert llm.base_url == "http://localhost:11434/v1" and llm.api_key == "ollama"


def test_a_custom_server_without_any_key_gets_a_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = build_llm(LLMSettings(model="openai/local-model", base_url="http://127.0.0.1:9/v1"))
    assert llm is not None and llm.api_key == PLACEHOLDER_API_KEY


def test_the_providers_usual_key_variable_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    llm = build_llm(LLMSettings(model="openai/gpt-4o-mini"))
    assert llm is not None and llm.api_key == "sk-from-env"


def test_openai_without_any_key_fails_fast_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        build_llm(LLMSettings(model="openai/gpt-4o-mini"))


def test_an_unavailable_provider_is_a_configuration_error() -> None:
    # No LiteLLM and no Anthropic SDK are installed here: both routes must fail with one clear message.
    for model in ("someprovider/some-model", "anthropic/claude-3-5-haiku-latest"):
        with pytest.raises(ConfigurationError, match="RESEARCHCREW_LLM__MODEL"):
            build_llm(LLMSettings(model=model))


def test_quiet_crewai_sets_defaults_without_overriding_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in QUIET_CREWAI_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "true")  # a user who opted in keeps their choice
    quiet_crewai()
    assert os.environ["CREWAI_DISABLE_TELEMETRY"] == "true"
    assert os.environ["OTEL_SDK_DISABLED"] == "true"
    assert os.environ["CREWAI_TRACING_ENABLED"] == "true"


def test_llm_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_LLM__MODEL", "ollama/llama3.1")
    monkeypatch.setenv("RESEARCHCREW_LLM__BASE_URL", "http://127.0.0.1:11500")
    monkeypatch.setenv("RESEARCHCREW_LLM__STRUCTURED_OUTPUT", "false")
    settings = Settings()
    assert (settings.llm.model, settings.llm.structured_output) == ("ollama/llama3.1", False)
    llm = build_llm(settings.llm)
    assert llm is not None and llm.base_url == "http://127.0.0.1:11500/v1"
