"""Settings: nested environment variables, the ecosystems' own variables, secrets kept out of logs, the data dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from researchcrew.settings import (
    BUILTIN_SOURCE_TYPES,
    FirecrawlSettings,
    RetrievalSettings,
    Settings,
    default_data_dir,
    default_model_cache_dir,
)


def test_defaults_without_environment() -> None:
    settings = Settings()
    assert settings.enabled_sources == list(BUILTIN_SOURCE_TYPES)
    assert settings.milvus.uri is None
    assert settings.firecrawl.api_key is None
    assert settings.zep.api_url is None
    assert settings.retrieval == RetrievalSettings()
    assert settings.retrieval.timeout_per_source_s == 7.0  # the seed's per-tool timeout
    assert settings.retrieval.run_deadline_s == 30.0  # the seed's whole-run limit


def test_nested_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_MILVUS__URI", "http://milvus:19530")
    monkeypatch.setenv("RESEARCHCREW_MILVUS__TOKEN", "root:Milvus")
    monkeypatch.setenv("RESEARCHCREW_RETRIEVAL__TIMEOUT_PER_SOURCE_S", "2.5")
    monkeypatch.setenv("RESEARCHCREW_RETRIEVAL__RERANK__ENABLED", "true")  # two levels deep
    monkeypatch.setenv("RESEARCHCREW_LLM__MODEL", "ollama/llama3.1")
    monkeypatch.setenv("RESEARCHCREW_ENABLED_SOURCES", '["rag", "arxiv"]')

    settings = Settings()

    assert settings.milvus.uri == "http://milvus:19530"
    assert settings.milvus_uri == "http://milvus:19530"
    assert settings.milvus.token is not None
    assert settings.milvus.token.get_secret_value() == "root:Milvus"
    assert settings.retrieval.timeout_per_source_s == 2.5
    assert settings.retrieval.rerank.enabled is True
    assert settings.llm.model == "ollama/llama3.1"
    assert settings.enabled_sources == ["rag", "arxiv"]


def test_invalid_environment_values_fail_with_the_variable_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_RETRIEVAL__TIMEOUT_PER_SOURCE_S", "0")
    with pytest.raises(ValidationError, match=r"retrieval\.timeout_per_source_s"):
        Settings()


def test_unknown_top_level_settings_are_rejected() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Settings(retreival={"num_results": 3})  # type: ignore[call-arg]


def test_ecosystem_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRECRAWL_API_KEY", "fc-from-firecrawl-env")
    monkeypatch.setenv("FIRECRAWL_API_URL", "http://firecrawl.local:3002")
    monkeypatch.setenv("ZEP_API_KEY", "zep-key")
    monkeypatch.setenv("ZEP_API_URL", "http://zep.local:8000")

    settings = Settings()

    assert settings.firecrawl.api_key is not None
    assert settings.firecrawl.api_key.get_secret_value() == "fc-from-firecrawl-env"
    assert settings.firecrawl.api_url == "http://firecrawl.local:3002"
    assert settings.zep.api_key is not None
    assert settings.zep.api_key.get_secret_value() == "zep-key"
    assert settings.zep.api_url == "http://zep.local:8000"


def test_researchcrew_variables_win_over_ecosystem_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRECRAWL_API_KEY", "from-firecrawl-env")
    monkeypatch.setenv("RESEARCHCREW_FIRECRAWL__API_KEY", "from-researchcrew-env")
    monkeypatch.setenv("ZEP_API_URL", "http://zep-ecosystem:8000")
    monkeypatch.setenv("RESEARCHCREW_ZEP__API_URL", "http://zep-researchcrew:8000")

    settings = Settings()

    assert settings.firecrawl.api_key is not None
    assert settings.firecrawl.api_key.get_secret_value() == "from-researchcrew-env"
    assert settings.zep.api_url == "http://zep-researchcrew:8000"


def test_ecosystem_variables_fill_only_the_fields_left_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # The group is partly configured through RESEARCHCREW_ (the URL); the key still comes from FIRECRAWL_API_KEY.
    monkeypatch.setenv("RESEARCHCREW_FIRECRAWL__API_URL", "http://self-hosted:3002")
    monkeypatch.setenv("FIRECRAWL_API_KEY", "fc-key")
    monkeypatch.setenv("ZEP_API_URL", "")  # empty means unset

    settings = Settings()

    assert settings.firecrawl.api_url == "http://self-hosted:3002"
    assert settings.firecrawl.api_key is not None
    assert settings.firecrawl.api_key.get_secret_value() == "fc-key"
    assert settings.zep.api_url is None


def test_constructor_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRECRAWL_API_KEY", "from-env")
    monkeypatch.setenv("RESEARCHCREW_RETRIEVAL__NUM_RESULTS", "9")
    settings = Settings(firecrawl={"api_key": "from-code"}, retrieval={"num_results": 3})
    assert settings.firecrawl.api_key is not None
    assert settings.firecrawl.api_key.get_secret_value() == "from-code"
    assert settings.retrieval.num_results == 3


def test_secrets_do_not_leak_into_repr_str_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "FIRECRAWL_API_KEY": "fc-SECRET-1",
        "ZEP_API_KEY": "zep-SECRET-2",
        "RESEARCHCREW_LLM__API_KEY": "sk-SECRET-3",
        "RESEARCHCREW_MILVUS__TOKEN": "root:SECRET-4",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)

    settings = Settings()
    renderings = [
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(settings.firecrawl),
        str(settings.model_dump()),
    ]
    for rendering in renderings:
        for value in secrets.values():
            assert value not in rendering
    assert "**********" in repr(settings.firecrawl)
    assert settings.llm.api_key is not None
    assert settings.llm.api_key.get_secret_value() == "sk-SECRET-3"


def test_data_dir_default_is_the_platform_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RESEARCHCREW_DATA_DIR")  # set per test by conftest
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))

    settings = Settings()

    assert settings.data_dir == default_data_dir()
    assert settings.data_dir == tmp_path / "xdg" / "researchcrew"
    assert not settings.data_dir.exists()  # building settings has no side effects


def test_data_dir_override_drives_every_local_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data_dir = tmp_path / "state"
    monkeypatch.setenv("RESEARCHCREW_DATA_DIR", str(data_dir))

    settings = Settings()

    assert settings.data_dir == data_dir
    assert settings.milvus_uri == str(data_dir / "knowledge.db")
    assert settings.memory_database_url == f"sqlite+aiosqlite:///{data_dir / 'memory.db'}"
    assert settings.model_cache_dir == default_model_cache_dir()  # shared by every data directory
    assert settings.ensure_data_dir() == data_dir
    assert data_dir.is_dir()


def test_explicit_locations_win_over_the_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_MEMORY__DATABASE_URL", "postgresql+asyncpg://u@127.0.0.1/test")
    monkeypatch.setenv("RESEARCHCREW_EMBEDDING__CACHE_DIR", "/var/cache/rc")
    settings = Settings()
    assert settings.memory_database_url == "postgresql+asyncpg://u@127.0.0.1/test"
    assert settings.model_cache_dir == Path("/var/cache/rc")


def test_every_setting_is_documented() -> None:
    def undocumented(model: type, prefix: str = "") -> list[str]:
        missing: list[str] = []
        for name, field in model.model_fields.items():  # type: ignore[attr-defined]
            if not field.description:
                missing.append(prefix + name)
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                missing += undocumented(annotation, f"{prefix}{name}.")
        return missing

    assert undocumented(Settings) == []


def test_misspelt_nested_variable_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHCREW_MILVUS__URL", "http://milvus:19530")  # the field is `uri`
    with pytest.raises(ValidationError, match=r"milvus\.url"):
        Settings()


def test_a_source_without_its_own_timeout_takes_the_retrieval_default() -> None:
    settings = Settings(retrieval={"timeout_per_source_s": 3.5}, arxiv={"timeout_s": 12})
    assert settings.firecrawl.timeout_s == 3.5  # one number governs the web source: the shared default
    assert settings.firecrawl.effective_timeout_s == 3.5
    assert settings.arxiv.timeout_s == 12  # its own, when set
    assert FirecrawlSettings().effective_timeout_s == RetrievalSettings().timeout_per_source_s
