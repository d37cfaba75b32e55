"""Questions from files: ``.txt`` (one per line), ``.csv`` (a ``question`` column; the other columns are carried
into the results) and ``.jsonl`` (``{"question": ..., <ask() options>}`` per line).

Everything is checked before anything is stored or queued, and a file with bad lines is refused as a whole with
each bad line named (``JobInputError``): an empty or unreadable file, a CSV without a ``question`` column (the
message lists the columns it has), an empty or over-long question, an option ``ask()`` does not take.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from researchcrew.contracts._base import unstorable_character
from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.errors import JobInputError
from researchcrew.jobs.contracts import JobQuestion, QuestionOptions
from researchcrew.text.json_input import JsonInputError, read_json_lines

SUFFIXES = (".txt", ".csv", ".jsonl")
QUESTION_COLUMN = "question"
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_REPORTED_PROBLEMS = 20
_CSV_DELIMITERS = ",;\t|"


@dataclass
class LoadedQuestions:
    """The questions of a file, in order, and the CSV columns carried with them."""

    questions: list[JobQuestion]
    columns: list[str] = field(default_factory=list)
    source: str = "inline"


def load_questions(path: Path, *, max_questions: int) -> LoadedQuestions:
    """Read and check a question file (see the module docstring). Raises ``JobInputError``."""
    _check_suffix(path.name)
    return parse_questions(path.name, _read_text(path), max_questions=max_questions)


def parse_questions(name: str, text: str, *, max_questions: int) -> LoadedQuestions:
    """Check questions given as the text of a file called ``name`` (an upload, say); its suffix says the format."""
    suffix = _check_suffix(name)
    if not text.strip():
        raise JobInputError(f"{name}: the file is empty")
    if suffix == ".txt":
        loaded = _from_text(text)
    elif suffix == ".csv":
        loaded = _from_csv(text.removeprefix("\ufeff"), name)
    else:
        loaded = _from_jsonl(text)
    loaded.source = name
    _check_count(loaded, name, max_questions)
    return loaded


def _check_suffix(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise JobInputError(f"{name}: questions come from .txt, .csv or .jsonl files, not {suffix or 'no suffix'}")
    return suffix


def inline_questions(texts: Iterable[str], *, max_questions: int) -> LoadedQuestions:
    """Questions given directly (SDK, HTTP): each one checked like a line of a .txt file."""
    problems: list[str] = []
    questions: list[JobQuestion] = []
    for number, text in enumerate(texts, start=1):
        question = _question(text, f"question {number}", problems)
        if question is not None:
            questions.append(JobQuestion(question=question))
    _raise_if(problems, "the questions")
    loaded = LoadedQuestions(questions)
    _check_count(loaded, "the questions", max_questions)
    return loaded


# Formats --------------------------------------------------------------------------------------------------------
def _from_text(text: str) -> LoadedQuestions:
    problems: list[str] = []
    questions: list[JobQuestion] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # blank lines and comments
        question = _question(stripped, f"line {number}", problems)
        if question is not None:
            questions.append(JobQuestion(question=question, line=number))
    _raise_if(problems, "the file")
    return LoadedQuestions(questions)


def _from_csv(text: str, name: str) -> LoadedQuestions:
    header_line = text.splitlines()[0] if text.splitlines() else ""
    try:  # only the delimiter is guessed (from the header); quoting is standard CSV (RFC 4180)
        delimiter = csv.Sniffer().sniff(header_line, delimiters=_CSV_DELIMITERS).delimiter
    except csv.Error:
        delimiter = ","
    reader = csv.reader(io.StringIO(text), csv.excel, delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as error:
        raise JobInputError(f"{name}: no CSV header could be read ({error})") from None
    names = [column.strip() for column in header]
    for column in names:
        unstorable = unstorable_character(column)
        if unstorable is not None:
            raise JobInputError(f"{name}: a CSV column name contains {unstorable}, which cannot be stored")
    lowered = [column.lower() for column in names]
    if QUESTION_COLUMN not in lowered:
        listed = ", ".join(repr(column) for column in names if column) or "none"
        raise JobInputError(f"{name}: the CSV has no 'question' column (its columns: {listed})")
    question_at = lowered.index(QUESTION_COLUMN)
    carried = [(position, column) for position, column in enumerate(names) if position != question_at and column]
    duplicates = sorted({column for _, column in carried if [c for _, c in carried].count(column) > 1})
    if duplicates:
        raise JobInputError(f"{name}: the CSV header repeats the column(s) {', '.join(map(repr, duplicates))}")
    problems: list[str] = []
    questions: list[JobQuestion] = []
    start = reader.line_num + 1
    try:
        for row in reader:
            where = f"line {start}"
            if not any(cell.strip() for cell in row):
                start = reader.line_num + 1
                continue  # a blank row
            if len(row) != len(names):
                problems.append(f"{where}: {len(row)} fields where the header has {len(names)}")
            else:
                question = _question(row[question_at], where, problems)
                bad_cells = [problem for cell in row if (problem := unstorable_character(cell))]
                if question is not None and bad_cells:
                    problems.append(f"{where}: a cell contains {bad_cells[0]}, which cannot be stored")
                elif question is not None:
                    values = {column: row[position] for position, column in carried}
                    questions.append(JobQuestion(question=question, carried=values, line=start))
            start = reader.line_num + 1
    except csv.Error as error:
        problems.append(f"line {reader.line_num}: {error}")
    _raise_if(problems, name)
    return LoadedQuestions(questions, columns=[column for _, column in carried])


def _from_jsonl(text: str) -> LoadedQuestions:
    problems: list[str] = []
    questions: list[JobQuestion] = []
    valid_keys = [QUESTION_COLUMN, *QuestionOptions.model_fields]
    for number, record in read_json_lines(text):
        where = f"line {number}"
        if isinstance(record, JsonInputError):
            problems.append(str(record))
            continue
        if not isinstance(record, dict):
            problems.append(f'{where}: expected an object like {{"question": "..."}}, got {type(record).__name__}')
            continue
        unknown = sorted(set(record) - set(valid_keys))
        if unknown:
            problems.append(f"{where}: unknown key(s) {unknown} (valid: {', '.join(valid_keys)})")
            continue
        raw = record.get(QUESTION_COLUMN)
        if not isinstance(raw, str):
            problems.append(f'{where}: "question" must be a string')
            continue
        question = _question(raw, where, problems)
        try:
            options = QuestionOptions.model_validate({k: v for k, v in record.items() if k != QUESTION_COLUMN})
        except ValidationError as error:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            problems.append(f"{where}: {details}")
            continue
        if question is not None:
            questions.append(JobQuestion(question=question, options=options, line=number))
    _raise_if(problems, "the file")
    return LoadedQuestions(questions)


# Checks ---------------------------------------------------------------------------------------------------------
def _question(raw: str, where: str, problems: list[str]) -> str | None:
    text = raw.strip()
    if not text:
        problems.append(f"{where}: the question is empty")
        return None
    unstorable = unstorable_character(text)
    if unstorable is not None:
        problems.append(f"{where}: the question contains {unstorable}, which cannot be stored")
        return None
    if len(text) > MAX_QUERY_CHARS:
        problems.append(f"{where}: the question is {len(text)} characters long (the limit is {MAX_QUERY_CHARS})")
        return None
    return text


def _raise_if(problems: Sequence[str], what: str) -> None:
    if not problems:
        return
    shown = list(problems[:MAX_REPORTED_PROBLEMS])
    more = len(problems) - len(shown)
    tail = f"; and {more} more" if more else ""
    raise JobInputError(f"{what}: {len(problems)} bad line(s): {'; '.join(shown)}{tail}")


def _check_count(loaded: LoadedQuestions, what: str, max_questions: int) -> None:
    if not loaded.questions:
        raise JobInputError(f"{what}: no questions found")
    if len(loaded.questions) > max_questions:
        raise JobInputError(
            f"{what}: {len(loaded.questions)} questions, more than one job may hold ({max_questions}; "
            "settings.jobs.max_questions)"
        )


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise JobInputError(f"{path.name}: the file is {size} bytes, more than {MAX_FILE_BYTES}")
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise JobInputError(f"{path.name}: not UTF-8 text (byte {error.start}: {error.reason})") from None
    except OSError as error:
        raise JobInputError(f"{path}: cannot read the file ({error.strerror or error})") from None
