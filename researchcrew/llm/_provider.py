"""The language model, built from settings: any provider crewAI supports, or none at all.

``build_llm(settings.llm)`` returns ``None`` when no model is configured — then no LLM is ever constructed and
nothing is sent anywhere; answers are extractive. Otherwise it returns crewAI's ``LLM(...)``, which routes by
model string (crewAI 1.15, ``crewai/llm.py``):

* ``openai/<model>`` and bare OpenAI names go to crewAI's native OpenAI provider (the ``openai`` SDK, Chat
  Completions API). With ``base_url`` set, an unknown model name such as ``openai/qwen2.5`` is sent to that
  OpenAI-compatible server (``custom_openai``), which is how vLLM, LM Studio or llama.cpp servers are used.
* ``ollama/<model>`` and ``hosted_vllm/<model>`` go to crewAI's OpenAI-compatible provider with the right
  defaults (``http://localhost:11434/v1`` for Ollama, no key needed); ``base_url`` overrides the address.
* ``anthropic/...``, ``gemini/...``, ``bedrock/...``, ``azure/...`` use their native SDKs when installed
  (``crewai[anthropic]`` etc.); other prefixes need LiteLLM (``pip install litellm``), which is not a dependency.

Keys: ``settings.api_key`` when given, else the provider's usual variable, read by crewAI itself
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``OLLAMA_API_KEY``, ...). An OpenAI-compatible
server at a custom ``base_url`` with no key anywhere gets a placeholder bearer token, since local servers ignore it.

Timeouts: ``timeout`` and ``max_retries`` are passed to providers whose client takes them (OpenAI and
OpenAI-compatible, Anthropic, Azure); the Synthesizer's own deadline bounds every call regardless.

Privacy: crewAI's anonymous telemetry and its execution tracing are switched off by ``quiet_crewai()`` (called
here and by our entry points before crewAI is imported): ``CREWAI_DISABLE_TELEMETRY=true``,
``OTEL_SDK_DISABLED=true`` and ``CREWAI_TRACING_ENABLED=false``, each only where the user has not set it. Crews
are also created with ``tracing=False``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from researchcrew.errors import ConfigurationError
from researchcrew.settings import LLMSettings

if TYPE_CHECKING:
    from crewai import BaseLLM

logger = logging.getLogger(__name__)

QUIET_CREWAI_ENVIRONMENT: dict[str, str] = {
    "CREWAI_DISABLE_TELEMETRY": "true",  # crewAI's anonymous usage telemetry (OpenTelemetry export)
    "OTEL_SDK_DISABLED": "true",  # any OpenTelemetry SDK set up by dependencies
    "CREWAI_TRACING_ENABLED": "false",  # crewAI execution tracing and its first-run trace collection
}

PLACEHOLDER_API_KEY = "no-key-needed"  # sent to OpenAI-compatible servers that were given no key


def quiet_crewai() -> None:
    """Turn crewAI telemetry and tracing off unless the user chose otherwise. Call before importing crewai."""
    for name, value in QUIET_CREWAI_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def _provider_fields(model: str, kwargs: dict[str, Any]) -> frozenset[str]:
    """Constructor fields of the class ``LLM(model, **kwargs)`` will build, so that only options it declares are
    passed (crewAI forwards undeclared options into the request body as extra parameters)."""
    from crewai import LLM

    try:
        route = LLM._resolve_route(model, kwargs)
    except (AttributeError, ImportError, TypeError, ValueError):  # other crewAI minor; provider missing or rejected
        logger.debug("could not resolve the crewAI provider for %r; passing only common options", model)
        return frozenset()
    target = route.native_class or LLM
    return frozenset(target.model_fields)


def build_llm(settings: LLMSettings) -> BaseLLM | None:
    """The configured LLM, or None when ``settings.model`` is not set (nothing is constructed or sent)."""
    if not settings.model:
        return None
    quiet_crewai()
    from crewai import LLM

    model = settings.model.strip()
    kwargs: dict[str, Any] = {"temperature": settings.temperature}
    if settings.base_url:
        kwargs["base_url"] = settings.base_url
    if settings.api_key is not None:
        kwargs["api_key"] = settings.api_key.get_secret_value()
    if settings.max_tokens is not None:
        kwargs["max_tokens"] = settings.max_tokens
    fields = _provider_fields(model, kwargs)
    if "timeout" in fields:
        kwargs["timeout"] = settings.timeout_s
    if "max_retries" in fields:
        kwargs["max_retries"] = settings.max_retries
    try:
        llm: BaseLLM = LLM(model=model, **kwargs)
        if settings.base_url and getattr(llm, "api_key", "") is None:
            llm = LLM(model=model, **{**kwargs, "api_key": PLACEHOLDER_API_KEY})
    except (ImportError, ValueError) as exc:
        raise ConfigurationError(
            f"Cannot use the LLM {model!r}: {exc}. Set RESEARCHCREW_LLM__MODEL to a model crewAI supports "
            "(e.g. openai/gpt-4o-mini, ollama/llama3.1, or openai/<name> with RESEARCHCREW_LLM__BASE_URL for an "
            "OpenAI-compatible server), or unset it to answer without an LLM."
        ) from exc
    if getattr(llm, "provider", None) in ("openai", "azure") and getattr(llm, "api_key", "") is None:
        raise ConfigurationError(
            f"No API key for {model!r}: set {'AZURE_API_KEY' if llm.provider == 'azure' else 'OPENAI_API_KEY'} "
            "or RESEARCHCREW_LLM__API_KEY, or point RESEARCHCREW_LLM__BASE_URL at a local server."
        )
    logger.info("LLM configured: %s (%s)", model, type(llm).__name__)
    return llm
