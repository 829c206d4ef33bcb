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
