"""What the ONNX backend needs to know about a sentence-transformers model directory, and what it refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from researchcrew.errors import ModelUnavailableError

Pooling = Literal["mean", "cls", "max"]


@dataclass(frozen=True)
class ModelLayout:
    """What the ONNX path needs to know about a sentence-transformers model directory."""

    directory: Path
    pooling: Pooling
    dimension: int

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / "tokenizer.json"


def inspect_model(directory: Path) -> ModelLayout:
    """Read the model's module list; refuse layouts the numpy pooling does not reproduce (e.g. Dense layers)."""
    try:
        return _inspect_model(directory)
    except (OSError, ValueError, KeyError) as error:  # missing/garbled config files (JSONDecodeError is a ValueError)
        raise ModelUnavailableError(f"cannot read the model configuration in {directory}: {error}") from error


def _inspect_model(directory: Path) -> ModelLayout:
    if not directory.is_dir():
        raise ModelUnavailableError(f"the ONNX backend needs a local model directory, got {str(directory)!r}")
    if not (directory / "tokenizer.json").is_file():
        raise ModelUnavailableError(f"{directory} has no tokenizer.json (needed for fast tokenisation)")
    pooling: Pooling = "mean"
    dimension: int | None = None
    modules_file = directory / "modules.json"
    modules: list[dict[str, Any]] = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind == "Pooling":
            config = json.loads((directory / str(module.get("path", "")) / "config.json").read_text())
            flags = {key for key, value in config.items() if key.startswith("pooling_mode_") and value is True}
            modes: dict[str, Pooling] = {
                "pooling_mode_mean_tokens": "mean",
                "pooling_mode_cls_token": "cls",
                "pooling_mode_max_tokens": "max",
            }
            if len(flags) != 1 or next(iter(flags)) not in modes:
                raise ModelUnavailableError(f"pooling {sorted(flags)} is not supported by the ONNX backend")
            pooling = modes[next(iter(flags))]
            dimension = int(config.get("word_embedding_dimension") or 0) or None
        elif kind not in ("Transformer", "Normalize"):
            raise ModelUnavailableError(f"model module {kind!r} is not supported by the ONNX backend")
    if dimension is None:
        config = json.loads((directory / "config.json").read_text())
        dimension = int(config["hidden_size"])
    return ModelLayout(directory=directory, pooling=pooling, dimension=dimension)
