"""The import graph, read file by file (``ast`` over ``researchcrew/**/*.py``): the top-level packages form layers,
and a module imports only from its own layer or below, never up; no two packages import each other, even through a
third. Every import counts: at the top of a module, inside a function (lazy) and under ``TYPE_CHECKING``.

Today's exceptions are listed in ``KNOWN_VIOLATIONS``, each with the move that removes it; the list may only
shrink (a violation that is gone must be deleted from it, so it cannot come back unnoticed)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import researchcrew

PACKAGE = Path(researchcrew.__file__).resolve().parent
README = Path(__file__).resolve().parents[2] / "README.md"
ROOT = "researchcrew"

# Lowest first. A package may import from its own layer and the layers below it.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "redaction", "data", "net", "blocking"}),  # blocking: bounded pools for blocking calls
    frozenset({"settings", "contracts"}),
    frozenset({"db", "embedding", "text", "llm"}),  # db: engine, Base, tables, migrations, sessions
    frozenset({"knowledge", "memory"}),  # memory stands on db; its repository is memory/store.py
    frozenset({"tools"}),
    frozenset({"pipeline"}),
    frozenset({"deep"}),  # deep research stands on the pipeline; its runs' repository is deep/store.py
    frozenset({"runtime"}),
    frozenset({"jobs", "testing"}),  # jobs stand on db and the runtime
    frozenset({"client"}),  # a running service's routes as calls (httpx + contracts); the CLI and the SDK use it
    frozenset({"mcp_server"}),  # the MCP door's tools; the service mounts them at /mcp, the CLI serves them on stdio
    frozenset({"service", "assistant"}),  # the HTTP and SDK doors
    frozenset({"cli", "__main__", "__init__"}),  # the command line; the package's public API re-exports every door
)

# (importing module, imported module): known upward imports, each with the move that will remove it. Empty since
# the moves of issue 18 items 1 and 5; a new entry needs a comment saying why it cannot be fixed where it is made.
KNOWN_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()

# Routes and the OpenAI-compatible layer call repositories; they hold no SQL and open no database sessions.
NO_DATABASE_ACCESS = ("researchcrew.service.routes", "researchcrew.service.openai_compat")


def _module_name(path: Path) -> str:
    parts = [ROOT, *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The modules an ``import from`` names: ``from a import b`` is module ``a.b`` when that is a module."""
    if node.level:
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    found = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in _modules()]
    return found or [source]


@cache
def imports() -> dict[str, frozenset[str]]:
    """Each module of the package and the package's modules it imports."""
    graph: dict[str, frozenset[str]] = {}
    for module, path in _modules().items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                targets.update(_resolve(module, path, node))
        graph[module] = frozenset(t for t in targets if t == ROOT or t.startswith(ROOT + "."))
    return graph


def package_of(module: str) -> str:
    """The top-level package (or root module) a module belongs to: ``researchcrew.db.engine`` -> ``db``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"researchcrew/{package} has no layer: add it to LAYERS in {Path(__file__).name}")


def _edges() -> set[tuple[str, str]]:
    return {(module, target) for module, targets in imports().items() for target in targets}


def test_every_package_has_a_layer() -> None:
    for module in _modules():
        layer_of(package_of(module))


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = {
        (module, target) for module, target in _edges() if layer_of(package_of(target)) > layer_of(package_of(module))
    }
    assert upward - KNOWN_VIOLATIONS == set(), "an import reaches up a layer: move the code down, or invert it"
    assert KNOWN_VIOLATIONS - upward == set(), "a known violation is gone: delete it from KNOWN_VIOLATIONS"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a list of nodes, first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_circle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, target in _edges() - KNOWN_VIOLATIONS:
        if package_of(module) != package_of(target):
            graph[package_of(module)].add(package_of(target))
    assert _cycle(graph) is None


def test_no_circle_between_the_database_tables_and_their_domains() -> None:
    """The one circle the house had: ``jobs/tables.py`` <-> ``memory/models.py``. The database stands alone."""
    graph: dict[str, set[str]] = {module: set(targets) for module, targets in imports().items()}
    assert _cycle({m: t for m, t in graph.items() if m.startswith("researchcrew.db")}) is None
    for module in (m for m in graph if m.startswith("researchcrew.db")):
        assert {package_of(t) for t in graph[module]} <= {"db", "errors", "redaction", "data", "settings", "contracts"}
    assert not {t for t in imports()["researchcrew.db.job_tables"] if package_of(t) in {"memory", "jobs"}}
    assert not {t for m in _modules() if package_of(m) == "jobs" for t in imports()[m] if package_of(t) == "memory"}


def test_routes_and_the_openai_layer_call_repositories_only() -> None:
    """No SQL in routes or the OpenAI layer: no SQLAlchemy, no engine, no table, no session of their own."""
    offenders: dict[str, set[str]] = {}
    for module, path in _modules().items():
        if not module.startswith(NO_DATABASE_ACCESS):
            continue
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                named.add(node.module)
        bad = {name for name in named if name.split(".")[0] in {"sqlalchemy", "asyncpg", "aiosqlite", "sqlite3"}}
        bad |= {name for name in imports()[module] if package_of(name) == "db"}
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_the_layer_test_sees_the_imports() -> None:
    """A test that cannot fail is a defect: the graph finds known edges of every kind (top level, lazy, relative)."""
    graph = imports()
    assert "researchcrew.db.engine" in graph["researchcrew.memory.store"]  # top-level import
    assert "researchcrew.deep.store" in graph["researchcrew.runtime"]  # imported inside a method
    assert "researchcrew.db.job_tables" in graph["researchcrew.db.models"]  # `from researchcrew.db import x`
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def readme_layers() -> dict[str, int]:
    """The README's folder table: each package (or top-level module) it names, and the layer it gives it."""
    table: dict[str, int] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if row is None:
            continue
        for name in re.findall(r"`researchcrew/(\w+)(?:/|\.pyi?)`", row.group(2)):
            assert name not in table, f"researchcrew/{name} is in the README's folder table twice"
            table[name] = int(row.group(1))
    return table


def test_the_readme_folder_table_matches_the_layers() -> None:
    """Every package has its row in the README's folder table, with the layer it has here; no row names a package
    that does not exist."""
    packages = {package_of(module) for module in _modules()}
    table = readme_layers()
    assert packages - table.keys() == set(), "packages missing from the README's folder table"
    assert table.keys() - packages == set(), "the README's folder table names packages that do not exist"
    assert {name: layer for name, layer in table.items() if layer != layer_of(name)} == {}, "wrong layer in README"


def test_the_readme_table_reader_sees_the_rows() -> None:
    table = readme_layers()
    assert table["errors"] == 0 and table["runtime"] == layer_of("runtime") and table["__init__"] == len(LAYERS) - 1
    assert {"text", "llm"} <= table.keys()  # two packages in one row
