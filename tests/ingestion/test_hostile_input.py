"""Issue 13, items 5, 6 and 12: inputs that used to hang, abort or garble an ingest.

* a glob over a folder with a symlink to itself (``glob`` followed it until the path was too long);
* one JSONL line nested thousands of levels deep (a ``RecursionError`` aborted every file of the command);
* the progress bar's carriage-return frames in a log file when stderr is not a terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from researchcrew.cli import cli
from researchcrew.embedding.embedder import Embedder
from researchcrew.knowledge.loaders import discover, expand_glob, load_file

PROJECT = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> Path:
    (root / "notes" / "deep").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("# A\n\nAlpha notes.\n")
    (root / "notes" / "deep" / "b.md").write_text("# B\n\nBeta notes.\n")
    (root / "notes" / ".hidden.md").write_text("# hidden\n")
    (root / "notes" / "loop").symlink_to(root / "notes", target_is_directory=True)  # a link to itself
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "c.md").write_text("# C\n\nGamma notes.\n")
    (root / "notes" / "linked").symlink_to(root / "elsewhere", target_is_directory=True)  # a link elsewhere
    return root / "notes"


def test_a_recursive_glob_over_a_self_link_ends_and_follows_other_links(tmp_path: Path) -> None:
    notes = _tree(tmp_path)
    started = time.monotonic()
    matches = expand_glob(f"{notes}/**/*.md")
    assert time.monotonic() - started < 5

    names = sorted(Path(match).relative_to(notes).as_posix() for match in matches)
    assert names == ["a.md", "deep/b.md", "linked/c.md"]  # each real file once; no loop/..., no hidden file


def test_glob_semantics_match_the_standard_glob_where_it_terminates(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "x" / "y").mkdir(parents=True)
    for name in ("top.md", "x/one.md", "x/y/two.md", "x/y/three.txt", "x/.dot.md"):
        (root / name).write_text("text\n")
    import glob

    for pattern in ("**/*.md", "**", "x/**/*.md", "**/y/*", "*.md"):
        full = f"{root}/{pattern}"
        assert expand_glob(full) == sorted(glob.glob(full, recursive=True)), pattern


def test_discover_with_a_looping_glob_in_a_subprocess_does_not_hang(tmp_path: Path) -> None:
    """The way a user meets it: a separate process that must finish (a hang would hit the timeout)."""
    notes = _tree(tmp_path)
    code = (
        "import sys; from researchcrew.knowledge.loaders import discover; "
        "found = discover([sys.argv[1]]); print(len(found.files))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, f"{notes}/**/*.md"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        check=True,
    )
    assert result.stdout.strip() == "3"
    assert len(discover([notes]).files) == 2  # a folder argument does not follow links at all (unchanged)


def test_a_deeply_nested_jsonl_line_is_one_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    deep = '{"id": "deep", "text": ' + "[" * 100_000 + "]" * 100_000 + "}"
    nested_field = '{"id": "wide", "text": "fine text", "meta": ' + '{"x": ' * 5_000 + "{}" + "}" * 5_000 + "}"
    lines = [
        json.dumps({"id": "first", "text": "Glaciers carve valleys."}),
        deep,
        nested_field,
        json.dumps({"id": "last", "text": "Rivers cut canyons."}),
    ]
    path.write_text("\n".join(lines) + "\n")

    result = load_file(path)

    ids = [document.source_key.rsplit("#", 1)[1] for document in result.documents]
    assert "first" in ids and "last" in ids and "deep" not in ids
    assert [issue.line for issue in result.issues if "nested too deeply" in issue.reason] == [2, 3]


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_cache: Path, onnx_embedder: Embedder) -> CliRunner:
    monkeypatch.setenv("RESEARCHCREW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RESEARCHCREW_EMBEDDING__CACHE_DIR", str(model_cache))
    return CliRunner()


def test_one_deep_line_does_not_stop_the_other_files(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "deep", "text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nGlaciers carve U-shaped valleys.\n")

    result = runner.invoke(cli, ["ingest", str(bad), str(good), "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["documents_added"] == 1
    assert any("nested too deeply" in error["reason"] for error in report["errors"])


def test_progress_in_a_log_file_is_plain_lines(runner: CliRunner, tmp_path: Path) -> None:
    """CliRunner's stderr is not a terminal, like a log file: no carriage-return frames, plain lines instead."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(n), "text": f"Fact number {n}."}) + "\n" for n in range(5)))

    result = runner.invoke(cli, ["ingest", str(corpus)])

    assert result.exit_code == 0, result.output
    assert "\r" not in result.stderr
    assert "ingesting: 5/5 documents" in result.stderr
