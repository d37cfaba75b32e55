"""``GET /v1/sessions/{id}/tables/{table_id}``: a structured answer's table (issue 22), a page of it as JSON
(``?offset=&limit=``) or all of it as CSV (``?format=csv``, an attachment guarded against spreadsheet formulas).
Another user's session or table answers 404 exactly like one that does not exist."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import ConfigDict, Field

from researchcrew.contracts._base import StorableInput
from researchcrew.contracts.tables import AnswerTable
from researchcrew.errors import TableNotFoundError
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import problem_for, problem_responses
from researchcrew.service._state import Service
from researchcrew.text.answer_tables import table_csv

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=problem_responses(400, 401, 422, 429))


class TableQuery(StorableInput):
    """Which rows, and how (unknown parameters are refused, like unknown body fields)."""

    model_config = ConfigDict(extra="forbid")

    offset: int = Field(default=0, ge=0, le=10_000_000, description="Skip this many rows.")
    limit: int = Field(default=50, ge=1, le=1_000, description="At most this many rows (JSON).")
    format: Literal["json", "csv"] = Field(default="json", description="json: a page; csv: every row.")


@router.get(
    "/{session_id}/tables/{table_id}",
    response_model=AnswerTable,
    responses={
        **problem_responses(404, 503),
        200: {"content": {"text/csv": {"schema": {"type": "string"}}}, "description": "A page, or CSV."},
    },
    summary="A structured answer's table: a page of its rows (JSON), or all of them as CSV.",
)
async def read_table(
    service: Service,
    user: CurrentUser,
    session_id: Annotated[str, Path(min_length=1, max_length=256, description="The session's id.")],
    table_id: Annotated[str, Path(min_length=1, max_length=64, description="The table's id.")],
    query: Annotated[TableQuery, Query()],
) -> Response:
    try:
        table = await service.runtime.answer_table(user.user_id, session_id, table_id)
    except TableNotFoundError as error:
        raise problem_for(error, subject=table_id) from error
    if query.format == "csv":
        return Response(
            content=table_csv(table.columns, table.rows),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="table-{table.table_id}.csv"'},
        )
    page = table.page(query.offset, query.limit)
    return Response(content=page.model_dump_json(), media_type="application/json")
