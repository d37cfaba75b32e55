"""What every subcommand shares: building settings at the edge, one-line errors, JSON output."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from researchcrew.settings import Settings


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; a bad value ends the command with one clear line, not a traceback."""
    from pydantic import ValidationError

    from researchcrew.settings import Settings

    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise click.ClickException(f"invalid settings: {problems}") from error


def echo_json(payload: Any) -> None:
    """Print one JSON document to stdout (for `--json`)."""
    click.echo(json.dumps(payload, indent=2, default=str, ensure_ascii=False))
