"""The one reader of JSON that users send: a request body's depth, a line of a JSONL file, an option given as text.

The standard library parses by recursion, so a line of ``[[[[...`` thousands deep raises ``RecursionError`` (not a
``ValueError``) and whatever walks the result afterwards may hit the same wall. ``read_json`` refuses such input
before parsing it, with a ``JsonInputError`` (a ``ValueError``) that says what is wrong and where:

    read_json('{"a": 1}')                   # {'a': 1}
    read_json("[" * 5000, line=3)            # JsonInputError: line 3: nested too deeply (more than 64 levels)
    for number, value in read_json_lines(text): ...   # value is the record or the JsonInputError of that line
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

MAX_JSON_DEPTH = 64  # arrays and objects inside each other; real records and options nest a handful of levels
MAX_JSON_CHARS = 10 * 1024 * 1024  # one document or one line

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(code for code in range(256) if code not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class JsonInputError(ValueError):
    """JSON a user sent that cannot be read: not JSON, too deep or too long. ``str()`` names the line if known."""

    def __init__(self, reason: str, *, line: int | None = None, column: int | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{reason}")


def nesting_depth(text: str | bytes) -> int:
    """How deeply arrays and objects nest in ``text`` (0 for a scalar), not counting brackets inside strings.
    Linear, in C, without recursion. Text that is not JSON gets a number all the same (the parser then says what is
    wrong with it)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    steps = array("b", _STRING.sub(b"", data).translate(None, _NOT_BRACKETS).translate(_STEPS))  # +1 / -1
    return max(0, max(accumulate(steps), default=0))


def check_json_depth(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, line: int | None = None) -> None:
    """Raise ``JsonInputError`` when ``text`` nests deeper than ``max_depth``."""
    opening = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opening > max_depth and nesting_depth(text) > max_depth:
        raise JsonInputError(f"nested too deeply (more than {max_depth} levels)", line=line)


def read_json(
    text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int = MAX_JSON_CHARS, line: int | None = None
) -> Any:
    """``text`` parsed, or ``JsonInputError`` saying why not (``line``: its line number, named in the message)."""
    if len(text) > max_chars:
        raise JsonInputError(f"longer than {max_chars} characters", line=line)
    check_json_depth(text, max_depth=max_depth, line=line)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        reason = f"not valid JSON ({error.msg} at column {error.colno})"
        raise JsonInputError(reason, line=line, column=error.colno) from None
    except UnicodeDecodeError as error:
        raise JsonInputError(f"not UTF-8 text (byte {error.start}: {error.reason})", line=line) from None
    except RecursionError:  # not reached below the depth limit; kept so a deep input can never escape as a crash
        raise JsonInputError(f"nested too deeply (more than {max_depth} levels)", line=line) from None


def read_json_lines(
    text: str, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int = MAX_JSON_CHARS
) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for each non-blank line of a JSONL text; a line that cannot be read gives its
    ``JsonInputError`` as the record (the caller reports it and goes on, or refuses the file)."""
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            yield number, read_json(raw, max_depth=max_depth, max_chars=max_chars, line=number)
        except JsonInputError as error:
            yield number, error
