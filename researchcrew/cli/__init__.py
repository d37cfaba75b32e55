"""The ``researchcrew`` command.

Start-up must stay fast (``researchcrew --help`` well under half a second): this module imports only click. Each
subcommand lives in its own module under ``researchcrew.cli`` and is imported only when it is invoked, and heavy
libraries (crewai, torch, pymilvus) are imported inside the command functions that need them.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import click

# name → (module, attribute, one-line help shown by --help without importing the module)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "ask": ("researchcrew.cli._ask", "ask", "Ask a research question and print a cited answer."),
    "research": (
        "researchcrew.cli._research",
        "research",
        "Deep research: a plan you approve, each sub-question researched, one checked report.",
    ),
    "ingest": ("researchcrew.cli._ingest", "ingest", "Load files, folders or globs into the knowledge base."),
    "kb": ("researchcrew.cli._kb", "kb", "Inspect and maintain the knowledge base (stats, remove)."),
    "eval": ("researchcrew.cli._evaluate", "eval_group", "Evaluate retrieval quality on labelled data (BEIR layout)."),
    "memory": ("researchcrew.cli._memory", "memory", "Export or forget a user's memory."),
    "usage": ("researchcrew.cli._usage", "usage", "A user's questions, tokens and cost by day."),
    "jobs": ("researchcrew.cli._jobs", "jobs", "Batch research jobs: add, run (now or on a schedule), export."),
    "worker": ("researchcrew.cli._jobs", "worker", "Research queued batch questions (Redis-backed workers)."),
    "scheduler": ("researchcrew.cli._jobs", "scheduler", "Fire job schedules onto the queue (Redis)."),
    "mcp": ("researchcrew.cli._mcp", "mcp", "Run the MCP server over stdio (Claude Desktop, IDEs, crewAI agents)."),
    "serve": ("researchcrew.cli._serve", "serve", "Run the HTTP service: per-user sessions, streaming answers."),
    "users": ("researchcrew.cli._users", "users", "Add, list and revoke the HTTP service's users and API keys."),
    "collections": (
        "researchcrew.cli._collections",
        "collections",
        "Add, list and remove shared document collections and their members.",
    ),
    "tables": ("researchcrew.cli._tables", "tables", "Show or export the tables of structured answers (CSV)."),
    "status": ("researchcrew.cli._status", "status", "Each source's health: healthy, or backing off after a failure."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute, _ = target
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}.{attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Show the short help without importing every subcommand module.
        rows = [(name, help_text) for name, (_, _, help_text) in sorted(SUBCOMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# Commands that run until stopped: a warning that comes back an hour later is news there, so it is logged again.
LONG_RUNNING = frozenset({"serve", "worker", "scheduler", "mcp"})


class OncePerCommand(logging.Filter):
    """Each distinct warning once per command: a source that fails for every question of `jobs run` (web search not
    configured, arXiv unreachable) is said once, not once per question. Errors always pass."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        key = (record.name, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="researchcrew")
@click.pass_context
def cli(context: click.Context, verbose: int) -> None:
    """researchcrew: research answers in which every claim cites its source.

    Settings come from RESEARCHCREW_* environment variables (see `researchcrew.settings`); all local state lives
    in one data directory (RESEARCHCREW_DATA_DIR).
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    ours = not root.handlers  # basicConfig adds the stderr handler (not when embedded: CliRunner, a host app)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if ours and context.invoked_subcommand not in LONG_RUNNING:
        for handler in root.handlers:
            handler.addFilter(OncePerCommand())
    from researchcrew.redaction import install_log_redaction

    install_log_redaction()  # serve, worker, scheduler, ...: no credential in any log line


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point. As the ``researchcrew`` command (no ``argv``) the process ends as soon as the
    command is done, without the interpreter's module teardown (``cli/_exit.py``)."""
    if argv is not None:
        return cli.main(args=argv, prog_name="researchcrew")
    try:
        cli.main(prog_name="researchcrew")
    except SystemExit as done:
        from researchcrew.cli._exit import finish_process

        finish_process(done.code)
