"""docs/TOUR.md names the steps of wordcast's main paths, and docs/GLOSSARY.md the code of each
idea, as ``path:function`` (or ``path:Class.method``): each must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"`(src/[\w/]+\.py):([\w.]+)`")


def _defined(path: Path) -> set[str]:
    """Every function and class of a module, methods as Class.method."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return names


@pytest.mark.parametrize(("page", "least"), [("TOUR.md", 30), ("GLOSSARY.md", 25)])
def test_every_name_the_docs_give_exists(page: str, least: int) -> None:
    steps = STEP.findall((ROOT / "docs" / page).read_text())
    assert len(steps) >= least
    missing = [
        f"{path}:{name}"
        for path, name in steps
        if not (ROOT / path).is_file() or name not in _defined(ROOT / path)
    ]
    assert not missing, f"docs/{page} names code that does not exist: {missing}"


PAGES = ["README.md", "CONTRIBUTING.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def test_readme_is_a_first_page_that_leads_to_the_rest() -> None:
    """README stays a user's first page (300 lines at most) and links to every guide."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for page in ("docs/GUIDE.md", "docs/OPERATIONS.md", "docs/CONFIGURATION.md", "docs/TOUR.md"):
        assert f"]({page})" in readme, f"README does not link to {page}"
    for page in ("docs/GLOSSARY.md", "docs/ARCHITECTURE.md", "docs/CHANGES.md", "CONTRIBUTING.md"):
        assert f"]({page})" in readme, f"README does not link to {page}"


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_of_the_docs_leads_to_a_file(page: str) -> None:
    text = (ROOT / page).read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    missing = [
        t
        for t in targets
        if "://" not in t and not (ROOT / page).parent.joinpath(t).resolve().exists()
    ]
    assert not missing, f"{page} links to what is not there: {missing}"


def _identifiers(path: Path) -> set[str]:
    """Every name a Python module defines or uses (not its prose: docstrings, comments)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names |= set((node.asname or node.name).split("."))
            names |= set(node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= set(node.module.split("."))
    return names


def _retired() -> tuple[set[str], set[str]]:
    """The identifiers and the module names docs/GLOSSARY.md retires (its table's first column)."""
    text = (ROOT / "docs" / "GLOSSARY.md").read_text()
    table = text.split("## Retired names", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    names = {name for row in rows for name in re.findall(r"`([^`]+)`", row)}
    modules = {name.removesuffix(".py") for name in names if name.endswith(".py")}
    return {name for name in names if re.fullmatch(r"\w+", name)}, modules


def test_no_retired_name_is_an_identifier_in_the_code() -> None:
    retired, modules = _retired()
    assert {"analyzer", "Replica", "MatcherLinks", "Placer", "shed_k"} <= retired
    assert {"placing", "replica", "streaming"} <= modules
    spelled = re.compile(r"(?i)analyz")  # one spelling, in every form
    found: list[str] = []
    for path in sorted((ROOT / "src").rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        used = _identifiers(path)
        found += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(used & retired)]
        if path.stem in modules:
            found.append(f"{path.relative_to(ROOT)}: the module's name")
        found += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(used) if spelled.search(n)]
    for path in sorted((ROOT / "rust" / "src").rglob("*.rs")):
        words = set(re.findall(r"\b[A-Za-z_]\w*\b", path.read_text()))
        found += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(words & retired)]
    assert not found, f"retired names (docs/GLOSSARY.md) still in use: {found}"
