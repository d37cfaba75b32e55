"""docker-compose.yml and the Dockerfiles, checked statically (no image can be pulled here): the compose file parses,
every image is pinned, every RESEARCHCREW_* variable it sets is a real setting, every service has a health check and
the researchcrew services wait for healthy dependencies; the image installs the CPU build of torch and builds the
ONNX embedder at build time."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from researchcrew.settings import Settings
from tests.conftest import PROJECT_ROOT

COMPOSE = PROJECT_ROOT / "docker-compose.yml"
RESEARCHCREW_SERVICES = ("api", "worker", "scheduler")


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict) and isinstance(document.get("services"), dict)
    return document["services"]


def _pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest") and any(ch.isdigit() for ch in tag)


def test_every_image_is_pinned(services: dict[str, Any]) -> None:
    unpinned = {name: spec.get("image") for name, spec in services.items() if not _pinned(str(spec.get("image", "")))}
    assert unpinned == {}


def test_the_whole_stack_is_there(services: dict[str, Any]) -> None:
    assert {"api", "worker", "scheduler", "postgres", "redis", "milvus", "etcd", "minio", "zep", "zep-db"} <= set(
        services
    )
    assert services["worker"]["command"] == ["researchcrew", "worker"]
    assert services["scheduler"]["command"] == ["researchcrew", "scheduler"]
    assert services["api"]["command"] == ["researchcrew", "serve"]
    assert "--appendonly" in services["redis"]["command"]  # queued questions survive a Redis restart


def test_every_service_has_a_health_check(services: dict[str, Any]) -> None:
    missing = [name for name, spec in services.items() if not spec.get("healthcheck", {}).get("test")]
    assert missing == []


def test_researchcrew_services_wait_for_healthy_dependencies(services: dict[str, Any]) -> None:
    for name in RESEARCHCREW_SERVICES:
        dependencies = services[name]["depends_on"]
        assert {"postgres", "redis"} <= set(dependencies), name
        for dependency, condition in dependencies.items():
            assert condition == {"condition": "service_healthy"}, (name, dependency)
            assert services[dependency].get("healthcheck"), dependency
    assert {"milvus", "zep"} <= set(services["api"]["depends_on"])


def _setting_exists(variable: str) -> bool:
    path = variable.removeprefix("RESEARCHCREW_").lower().split("__")
    model: type[BaseModel] = Settings
    for position, part in enumerate(path):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if position < len(path) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def test_every_researchcrew_variable_is_a_real_setting(services: dict[str, Any]) -> None:
    variables = set(re.findall(r"\bRESEARCHCREW_[A-Z0-9_]+", COMPOSE.read_text()))
    variables |= set(re.findall(r"\bRESEARCHCREW_[A-Z0-9_]+", (PROJECT_ROOT / "Dockerfile").read_text()))
    assert "RESEARCHCREW_REDIS__URL" in variables
    assert sorted(v for v in variables if not _setting_exists(v)) == []
    assert not _setting_exists("RESEARCHCREW_REDIS__NOPE") and not _setting_exists("RESEARCHCREW_JOBZ__CONCURRENCY")


def test_the_environment_of_each_service_builds_valid_settings(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in RESEARCHCREW_SERVICES:
        for variable, value in services[name]["environment"].items():
            if variable.startswith("RESEARCHCREW_"):
                monkeypatch.setenv(variable, re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value)))
        settings = Settings()
        assert settings.redis.url == "redis://redis:6379/0" and settings.memory.backend == "zep"


def _from_lines(dockerfile: Path) -> list[str]:
    return [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("FROM ")]


@pytest.mark.parametrize("dockerfile", [PROJECT_ROOT / "Dockerfile", PROJECT_ROOT / "deploy" / "zep" / "Dockerfile"])
def test_dockerfile_bases_are_pinned(dockerfile: Path) -> None:
    bases = _from_lines(dockerfile)
    assert bases and all(_pinned(base) for base in bases), bases


def test_the_image_gets_cpu_torch_and_a_prebuilt_onnx_embedder() -> None:
    text = (PROJECT_ROOT / "Dockerfile").read_text()
    torch_install = next(line for line in text.splitlines() if "torch==" in line and "pip install" in line)
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_install
    assert text.index("torch==") < text.index("pip install .")  # before anything could pull the CUDA build
    assert "get_embedder" in text and "RESEARCHCREW_EMBEDDING__CACHE_DIR" in text
    assert "GOWORK=off" in (PROJECT_ROOT / "deploy" / "zep" / "Dockerfile").read_text()
