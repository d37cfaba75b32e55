"""Which stored source keys belong to a file: by prefix, so '#' in file names and record ids is safe."""

from __future__ import annotations

from pathlib import Path

from researchcrew.cli._kb import keys_under
from researchcrew.knowledge.ingest import keys_of_file

KEYS = sorted(
    [
        "/data/b.md",
        "/data/b.md#1",
        "/data/b.md#x#y",
        "/data/b.md.bak",
        "/data/b.mdx#2",
        "/data/C#/notes.md",
        "/data/C#/deep/more.jsonl#r1",
        "/data/Cx/other.md",
    ]
)


def test_keys_of_file_takes_the_file_and_its_records_only() -> None:
    assert keys_of_file(KEYS, "/data/b.md") == ["/data/b.md", "/data/b.md#1", "/data/b.md#x#y"]
    assert keys_of_file(KEYS, "/data/C#/notes.md") == ["/data/C#/notes.md"]
    assert keys_of_file(KEYS, "/data/missing.md") == []


def test_keys_under_a_folder_even_one_deleted_since() -> None:
    index = dict.fromkeys(KEYS, "id")
    assert keys_under(index, Path("/data/C#")) == ["/data/C#/deep/more.jsonl#r1", "/data/C#/notes.md"]
    assert keys_under(index, Path("/data/b.md")) == ["/data/b.md", "/data/b.md#1", "/data/b.md#x#y"]
