"""The fault matrix's results, filled by ``test_fault_matrix`` and printed by this folder's ``conftest`` at the end of
the run (``pytest_terminal_summary``: shown whether or not ``-s`` is given)."""

from __future__ import annotations

TOOLS = ("rag", "web", "arxiv", "memory")
FAULTS = ("hang", "429", "500", "malformed", "refused", "slow", "empty", "oversized")

# (tool, fault) -> (held, what was observed)
RESULTS: dict[tuple[str, str], tuple[bool, str]] = {}


def render() -> list[str]:
    """The 4 × 8 table: each cell the observed outcome, ✓ where it is the expected one."""
    width = 22
    lines = [" " * 8 + "".join(fault.ljust(width) for fault in FAULTS)]
    for tool in TOOLS:
        cells = []
        for fault in FAULTS:
            held, observed = RESULTS.get((tool, fault), (False, "not run"))
            cells.append(f"{'✓' if held else '✗'} {observed}"[: width - 1].ljust(width))
        lines.append(tool.ljust(8) + "".join(cells))
    held = sum(1 for ok, _ in RESULTS.values() if ok)
    lines.append(f"{held} of {len(TOOLS) * len(FAULTS)} hold ({len(RESULTS)} run)")
    return lines
