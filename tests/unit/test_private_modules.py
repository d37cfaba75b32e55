"""Internal modules are private, as httpx's are: a module that no other package imports and that the public API
(``researchcrew/__init__.pyi``) does not name carries a leading underscore (``knowledge/_tokens.py``), and a private
module is imported only inside its own package. Package folders keep their names: they are the architecture
(``tests/unit/test_layers.py``). Tests may import private modules; users import the public ones.

Read file by file (``ast`` over ``researchcrew/**/*.py``, plus the module names written as strings, which
``importlib`` loads). Written by ``/work/notes/private.sh`` (issue 18 item 6), which applies this same rule: it renames
what :func:`modules_to_make_private` returns and rewrites every reference."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.unit.test_layers import _modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "researchcrew"

# Public whatever imports them: what users import by module (the seed contracts, settings, errors, the test
# doubles), besides every module the public API names.
PUBLIC_PACKAGES = frozenset({"contracts", "settings", "errors", "testing"})
PUBLIC_MODULES: dict[str, str] = {
    "researchcrew.tools.base": "the Tool interface users implement for their own sources",
    "researchcrew.tools.crewai_adapter": "CrewAIToolAdapter: any Tool as a crewAI tool, for users' own crewAI agents",
    "researchcrew.knowledge.documents": "Document and Chunk, what KnowledgeBase.add_documents takes and gives back",
}
# Files that keep their names whatever the rule says: Alembic loads its environment and revisions by path.
NOT_MODULES = ("db/migrations/",)
# Private modules that other packages may import, each with why. The list may only shrink.
SHARED_PRIVATE: dict[str, str] = {
    "researchcrew.contracts._base": "the strict base model and value types of the contracts, which the domains' own"
    " models (knowledge, jobs, service) build on; users get them through the public contract models",
}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (the layer test's reading of the tree)."""
    return _modules()


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> Iterator[str]:
    if node.level:
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    yield source
    yield from (f"{source}.{alias.name}" for alias in node.names)


@cache
def importers() -> dict[str, frozenset[str]]:
    """Each module of the package and the modules of the package that import it (or name it in a string)."""
    found: dict[str, set[str]] = {name: set() for name in modules()}
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = list(_resolve(module, path, node))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                targets = [node.value.split(":")[0]]  # importlib.import_module("..."), "module:attribute"
            else:
                continue
            for target in targets:
                if target in found and target != module:
                    found[target].add(module)
    return {name: frozenset(users) for name, users in found.items()}


def package_of(module: str) -> str:
    return module.split(".")[1]


def public_api_modules() -> frozenset[str]:
    """The modules ``researchcrew/__init__.pyi`` re-exports from."""
    stub = ast.parse((PACKAGE / "__init__.pyi").read_text(encoding="utf-8"))
    return frozenset(
        f"researchcrew.{node.module}" for node in ast.walk(stub) if isinstance(node, ast.ImportFrom) and node.module
    )


def is_private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split(".")[2:])


def _ruled(module: str) -> bool:
    """Modules inside a package, subject to the rule: not a package's ``__init__``, not a top-level module (those
    are layers of their own), not a file loaded by path."""
    path = modules()[module]
    relative = path.relative_to(PACKAGE).as_posix()
    return path.name not in ("__init__.py", "__main__.py") and "/" in relative and not relative.startswith(NOT_MODULES)


def imported_from_outside(module: str) -> frozenset[str]:
    return frozenset(user for user in importers()[module] if package_of(user) != package_of(module))


def modules_to_make_private() -> dict[str, str]:
    """Public-looking modules that the rule makes private: ``{old dotted name: new dotted name}``."""
    public = public_api_modules() | PUBLIC_MODULES.keys()
    renames: dict[str, str] = {}
    for module in modules():
        if not _ruled(module) or is_private(module) or module in public:
            continue
        if package_of(module) in PUBLIC_PACKAGES or imported_from_outside(module):
            continue
        parent, leaf = module.rsplit(".", 1)
        renames[module] = f"{parent}._{leaf}"
    return renames


def test_every_internal_module_is_private() -> None:
    assert modules_to_make_private() == {}, "internal modules without the underscore: run /work/notes/private.sh"


def test_a_private_module_is_imported_only_inside_its_package() -> None:
    leaks = {
        module: sorted(imported_from_outside(module))
        for module in modules()
        if _ruled(module) and is_private(module) and imported_from_outside(module)
    }
    assert leaks.keys() - SHARED_PRIVATE.keys() == set(), f"make these public or keep them inside: {leaks}"
    assert SHARED_PRIVATE.keys() - leaks.keys() == set(), "no longer shared: delete it from SHARED_PRIVATE"


def test_the_public_api_names_public_modules_only() -> None:
    assert {module for module in public_api_modules() if is_private(module)} == set()
    assert public_api_modules() <= modules().keys(), "__init__.pyi names a module that does not exist"


def test_the_rule_sees_the_imports() -> None:
    """A test that cannot fail is a defect: the graph sees imports of every kind, and strings naming modules."""
    assert "researchcrew.runtime" in importers()["researchcrew.pipeline.flow"]  # importlib string, in a method
    assert "researchcrew.pipeline.assemble" in importers()["researchcrew.tools.rag"]  # lazy import
    assert imported_from_outside("researchcrew.tools.rag") and not is_private("researchcrew.tools.rag")
    assert is_private("researchcrew.contracts._base") and not is_private("researchcrew.__main__")
