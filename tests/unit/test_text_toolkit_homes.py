"""One home per idea: sentence splitting, stemming and stop words live in ``researchcrew.text``; fencing untrusted
text in a prompt and reading a model's reply live in ``researchcrew.llm``. A second copy anywhere else fails here."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import researchcrew

PACKAGE = Path(researchcrew.__file__).resolve().parent


@cache
def _modules() -> dict[str, ast.Module]:
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


@cache
def _nodes() -> dict[str, list[ast.AST]]:
    """Every node of each module but its docstrings, walked once for all the checks (a walk of the whole package
    per check cost seconds, and more under load)."""
    nodes: dict[str, list[ast.AST]] = {}
    for name, tree in _modules().items():
        docstrings = _docstrings(tree)
        nodes[name] = [node for node in ast.walk(tree) if id(node) not in docstrings]
    return nodes


def _where(predicate: object) -> set[str]:
    return {name for name, nodes in _nodes().items() if any(predicate(node) for node in nodes)}  # type: ignore[operator]


def _defines(function: str) -> object:
    return lambda node: isinstance(node, ast.FunctionDef) and node.name == function


def test_one_sentence_splitter_one_stemmer_one_stop_list() -> None:
    assert _where(_defines("split_sentences")) == {"text/sentences.py"}
    assert _where(_defines("stem")) == {"text/terms.py"}
    sentence_end = re.compile(r"\(\?<=\[\.!\?\]\)")  # a hand-rolled "after . ! ?" boundary
    assert not _where(
        lambda n: isinstance(n, ast.Constant) and isinstance(n.value, str) and sentence_end.search(n.value)
    )
    stop_lists = _where(
        lambda n: (
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and re.search(r"STOP_?WORD", t.id) for t in n.targets)
        )
    )
    # BM25's analysis is the stored index format (ANALYZER_VERSION): its own list, on purpose.
    assert stop_lists == {"text/terms.py", "knowledge/_analysis.py"}
    stemmers = _where(lambda n: isinstance(n, ast.Import) and any(a.name == "Stemmer" for a in n.names))
    assert stemmers == {"knowledge/_analysis.py", "knowledge/evaluation.py"}  # the BM25 index and its baseline


def test_one_fence_and_one_reply_parser() -> None:
    assert _where(_defines("fence_safe")) == {"llm/fence.py"}
    marker = re.compile(r"<<<[A-Z][A-Z ]*(?: \d+)?>>>\n|\n<<<END ")
    built_by_hand = _where(
        lambda n: (
            (isinstance(n, ast.Constant) and isinstance(n.value, str) and marker.search(n.value))
            or (
                isinstance(n, ast.JoinedStr)
                and any(isinstance(v, ast.Constant) and "<<<" in str(v.value) for v in n.values)
            )
        )
    )
    assert built_by_hand <= {"llm/fence.py"}, "prompt blocks are made by llm.fence.block"
    json_readers = _where(
        lambda n: isinstance(n, ast.Attribute) and n.attr in {"loads", "raw_decode", "model_validate_json"}
    )
    assert not {name for name in json_readers if name.startswith("pipeline/")}, "replies are read by llm.replies"
