"""Named script arguments (storage.lua): Python passes names, the script binds them from ARGV."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wordcast.storage import read_scripts
from wordcast.storage.lua import LuaScript

SRC = Path(__file__).resolve().parents[2] / "src" / "wordcast"


def test_arguments_are_bound_by_name_in_the_order_the_script_reads_them() -> None:
    script = LuaScript("id tenant", "return {id, tenant, #ids}", rest="ids")
    assert script.startswith("local id, tenant = ARGV[1], ARGV[2]\n")
    assert "for k = 3, #ARGV do ids[#ids + 1] = ARGV[k] end" in script
    assert script.args(tenant="t", ids=["a", "b"], id="x") == ["x", "t", "a", "b"]


def test_a_missing_or_unknown_argument_is_refused_before_redis() -> None:
    with pytest.raises(TypeError, match=r"missing \['cursor'\], unknown \['windw'\]"):
        read_scripts.TENANT_PAGE.args(tenant="t", wanted=1, windw="0")


def test_no_script_reads_argv_by_position() -> None:
    """Every Lua script in the package takes its arguments by name (storage/lua.py binds them)."""
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "lua.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bARGV\b", line)
    ]
    assert not found, found
