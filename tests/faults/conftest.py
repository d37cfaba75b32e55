"""Prints the fault matrix (tests/faults/matrix.py) in the terminal summary."""

from __future__ import annotations

import pytest

from tests.faults.matrix import RESULTS, render


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    terminalreporter.section("fault matrix: 4 real tools x 8 faults (answer within the deadline, right report)")
    for line in render():
        terminalreporter.write_line(line)
