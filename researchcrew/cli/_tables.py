"""`researchcrew tables show SESSION TABLE [--offset N --limit N] [--csv [-o FILE]]`: a structured answer's table
(issue 22) read from the memory database — a page of its rows as a Markdown table, or all of them as CSV (guarded
against spreadsheet formulas). ``researchcrew ask`` prints each table's id and session after the answer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from researchcrew.cli._common import with_runtime

if TYPE_CHECKING:
    from researchcrew.memory.records import StoredAnswerTable
    from researchcrew.runtime import Runtime


@click.group()
def tables() -> None:
    """Show or export the tables of structured answers."""


@tables.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("table_id", metavar="TABLE")
@click.option(
    "--user",
    "user_id",
    default="local",
    show_default=True,
    envvar="RESEARCHCREW_USER",
    help="Whose session it is.",
)
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Skip this many rows.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Show this many rows.")
@click.option("--csv", "as_csv", is_flag=True, help="Every row as CSV (to standard output, or to --output).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the CSV to this file.")
def show(
    session_id: str, table_id: str, user_id: str, offset: int, limit: int, as_csv: bool, output: Path | None
) -> None:
    """A page of a table's rows, or all of them as CSV."""
    from researchcrew.text.answer_tables import markdown_table, more_rows_line, table_csv

    if output is not None and not as_csv:
        raise click.UsageError("--output writes CSV: add --csv")

    async def read(runtime: Runtime) -> StoredAnswerTable:
        return await runtime.answer_table(user_id, session_id, table_id)

    table = with_runtime(read, hint="\n(tables are kept with the session in the memory store)")
    if as_csv:
        text = table_csv(table.columns, table.rows)
        if output is None:
            click.echo(text, nl=False)
        else:
            output.write_text(text, encoding="utf-8", newline="")
            click.echo(f"Wrote {table.total_rows} rows to {output}", err=True)
        return
    page = table.page(offset, limit)
    if table.title:
        click.echo(table.title)
    click.echo(f"Rows {page.offset + 1}–{page.offset + len(page.rows)} of {page.total_rows}")
    click.echo(markdown_table(page.columns, [row.model_copy(update={"citation": None}) for row in page.rows]))
    for note in table.notes:
        click.echo(note)
    if page.more_rows:
        click.echo(more_rows_line(page.more_rows).split(" — ")[0] + f" (--offset {page.offset + len(page.rows)})")
