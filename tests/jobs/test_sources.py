"""Question files: every format read as written, and bad input refused before anything is stored, with the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchcrew.contracts.query import MAX_QUERY_CHARS
from researchcrew.errors import JobInputError
from researchcrew.jobs.sources import inline_questions, load_questions, parse_questions


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_a_text_file_is_one_question_per_line_without_blanks_and_comments(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.txt", "# weekly questions\nWhat is metamorphic testing?\n\n  What is a flaky test?  \n")
    loaded = load_questions(path, max_questions=100)
    assert [(q.question, q.line) for q in loaded.questions] == [
        ("What is metamorphic testing?", 2),
        ("What is a flaky test?", 4),
    ]
    assert loaded.source == "q.txt" and loaded.columns == []


def test_a_csv_carries_its_other_columns_in_order(tmp_path: Path) -> None:
    text = '\ufeffid,Question,team\n1,What is mutation testing?,qa\n2,"What is a ""test oracle""?",dev\n'
    loaded = load_questions(_write(tmp_path, "q.csv", text), max_questions=100)
    assert loaded.columns == ["id", "team"]
    assert [q.question for q in loaded.questions] == ["What is mutation testing?", 'What is a "test oracle"?']
    assert loaded.questions[1].carried == {"id": "2", "team": "dev"}
    assert [q.line for q in loaded.questions] == [2, 3]


def test_a_semicolon_csv_is_read_too(tmp_path: Path) -> None:
    loaded = load_questions(_write(tmp_path, "q.csv", "question;topic\nWhat is RAG?;retrieval\n"), max_questions=9)
    assert loaded.questions[0].carried == {"topic": "retrieval"}


def test_a_csv_without_a_question_column_names_the_columns_it_has(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.csv", "query,topic\nWhat is RAG?,retrieval\n")
    with pytest.raises(
        JobInputError, match=r"q\.csv: the CSV has no 'question' column \(its columns: 'query', 'topic'\)"
    ):
        load_questions(path, max_questions=9)


def test_a_file_with_bad_lines_reports_each_by_line_number(tmp_path: Path) -> None:
    long = "why " * (MAX_QUERY_CHARS // 4 + 1)
    path = _write(tmp_path, "q.csv", f"question,topic\nWhat is RAG?,a\n,b\n{long},c\nWhat is BM25?,d,extra\n")
    with pytest.raises(JobInputError) as caught:
        load_questions(path, max_questions=9)
    message = str(caught.value)
    assert "3 bad line(s)" in message
    assert "line 3: the question is empty" in message
    assert f"line 4: the question is {len(long.strip())} characters long (the limit is {MAX_QUERY_CHARS})" in message
    assert "line 5: 3 fields where the header has 2" in message


def test_jsonl_lines_carry_their_own_options_and_bad_ones_are_named(tmp_path: Path) -> None:
    good = [{"question": "What is RAG?", "response_format": "concise"}, {"question": "What is BM25?"}]
    loaded = load_questions(_write(tmp_path, "q.jsonl", "\n".join(json.dumps(g) for g in good)), max_questions=9)
    assert loaded.questions[0].options.response_format == "concise"
    assert loaded.questions[1].options.given() == {}
    bad = (
        '{"question": "ok?"}\n{"question": "x", "formatt": "concise"}\nnot json\n'
        '{"question": "y", "deadline_s": -1}\n[1]\n'
    )
    with pytest.raises(JobInputError) as caught:
        load_questions(_write(tmp_path, "bad.jsonl", bad), max_questions=9)
    message = str(caught.value)
    assert "line 2: unknown key(s) ['formatt']" in message and "response_format" in message
    assert "line 3: not valid JSON" in message
    assert "line 4: deadline_s: Input should be greater than 0" in message
    assert "line 5: expected an object" in message


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.txt", "", "the file is empty"),
        ("blank.csv", "\n\n  \n", "the file is empty"),
        ("comments.txt", "# nothing\n\n", "no questions found"),
        ("latin1.txt", "Qu'est-ce qu'un caf\xe9?".encode("latin-1"), "not UTF-8 text"),
        ("questions.pdf", "x", "not .pdf"),
        ("header.csv", "question,topic\n", "no questions found"),
    ],
)
def test_empty_unreadable_or_unknown_files_are_refused(
    tmp_path: Path, name: str, content: str | bytes, expected: str
) -> None:
    with pytest.raises(JobInputError, match=expected.replace(".", r"\.")):
        load_questions(_write(tmp_path, name, content), max_questions=9)


def test_a_missing_file_says_it_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(JobInputError, match="cannot read the file"):
        load_questions(tmp_path / "nowhere.txt", max_questions=9)


def test_too_many_questions_are_refused_with_the_limit(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.txt", "\n".join(f"Question {n}?" for n in range(5)))
    with pytest.raises(JobInputError, match=r"5 questions, more than one job may hold \(4"):
        load_questions(path, max_questions=4)


def test_inline_questions_are_checked_like_lines() -> None:
    with pytest.raises(JobInputError, match="question 2: the question is empty"):
        inline_questions(["What is RAG?", "   "], max_questions=9)


_question_text = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="#\ufeff\x85"),
        min_size=1,
        max_size=80,
    )
    .map(str.strip)
    .filter(lambda text: text and not text.startswith("#"))
)


@settings(max_examples=60, deadline=None)
@given(questions=st.lists(_question_text, min_size=1, max_size=20))
def test_any_questions_written_to_a_text_file_or_csv_read_back_the_same(
    tmp_path_factory: pytest.TempPathFactory, questions: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("prop")
    text_file = _write(folder, "q.txt", "\n".join(questions) + "\n")
    assert [q.question for q in load_questions(text_file, max_questions=100).questions] == questions
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["question", "n"])
    writer.writerows([question, str(n)] for n, question in enumerate(questions))
    loaded = load_questions(_write(folder, "q.csv", buffer.getvalue()), max_questions=100)
    assert [q.question for q in loaded.questions] == questions
    assert [q.carried["n"] for q in loaded.questions] == [str(n) for n in range(len(questions))]


def test_an_upload_is_parsed_like_a_file_of_its_name() -> None:
    loaded = parse_questions("upload.csv", "\ufeffquestion,team\nWhat is RAG?,qa\n", max_questions=9)
    assert (loaded.source, loaded.columns, loaded.questions[0].carried) == ("upload.csv", ["team"], {"team": "qa"})
    with pytest.raises(JobInputError, match=r"upload\.xlsx: questions come from \.txt, \.csv or \.jsonl"):
        parse_questions("upload.xlsx", "x", max_questions=9)


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("q.txt", "fine\nwhat is\x00 this\n", "line 2: the question contains a NUL character"),
        ("q.csv", "question,team\nfine,a\nok,b\x00\n", "line 3: a cell contains a NUL character"),
        ("q.csv", "question,te\x00am\nfine,a\n", "a CSV column name contains a NUL character"),
        ("q.jsonl", '{"question": "fine"}\n{"question": "x\\u0000"}\n', "line 2: the question contains a NUL"),
        ("q.jsonl", '{"question": "x\\ud800"}\n', "line 1: the question contains a lone surrogate"),
        ("q.jsonl", '{"question": "ok", "tool_options": {"web": {"d": "\\u0000"}}}\n', "line 1: tool_options"),
        ("q.jsonl", '{"question": "ok"}\n{"question": ' + "[" * 50_000 + "]" * 50_000 + "}\n", "line 2: nested"),
    ],
)
def test_what_no_store_can_keep_and_deep_lines_are_bad_lines(name: str, text: str, said: str) -> None:
    with pytest.raises(JobInputError) as caught:
        parse_questions(name, text, max_questions=10)
    assert said in str(caught.value)
