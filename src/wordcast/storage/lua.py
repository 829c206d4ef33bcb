"""Lua scripts with named arguments.

A script declares its arguments' names; it reads them as locals, bound from ``ARGV`` before its
first line, and Python passes them by name (:meth:`LuaScript.args`). Neither side counts
positions, and a name missing or unknown is an error in Python before anything reaches Redis.
Keys stay positional: each script's comment says which is which."""

from __future__ import annotations

from typing import Any


class LuaScript(str):
    """A script's source (what ``register_script`` takes), with its argument names.

    ``rest`` names the arguments after the named ones, as a Lua array (``ARGV`` itself when
    there are no named ones, so that a long list is not copied)."""

    names: tuple[str, ...]
    rest: str | None

    def __new__(cls, names: str, body: str, rest: str | None = None) -> LuaScript:
        listed = tuple(names.split())
        binding = ""
        if listed:
            values = ", ".join(f"ARGV[{k}]" for k in range(1, len(listed) + 1))
            binding = f"local {', '.join(listed)} = {values}\n"
        if rest and listed:
            binding += (
                f"local {rest} = {{}}\n"
                f"for k = {len(listed) + 1}, #ARGV do {rest}[#{rest} + 1] = ARGV[k] end\n"
            )
        elif rest:
            binding += f"local {rest} = ARGV\n"
        made = super().__new__(cls, binding + body)
        made.names, made.rest = listed, rest
        return made

    def args(self, **values: Any) -> list[Any]:
        """The arguments in the order the script binds them."""
        wanted = set(self.names) | ({self.rest} if self.rest else set())
        if set(values) != wanted:
            missing, unknown = sorted(wanted - set(values)), sorted(set(values) - wanted)
            raise TypeError(f"script arguments: missing {missing}, unknown {unknown}")
        return [values[name] for name in self.names] + list(values[self.rest] if self.rest else [])
