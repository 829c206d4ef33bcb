"""The usage lines `wordcast --help` opens with say what each command takes, as its parser does:
an option shown is one the command has, and one shown without brackets is one it requires,
unless it chooses the line's form (the first option, or one after a |: --pattern, --file)."""

from __future__ import annotations

import argparse
import re

import pytest

from wordcast.cli import USAGE, build_parser, main


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def test_every_option_the_usage_names_is_the_commands_and_brackets_say_optional() -> None:
    commands = _commands()
    checked = 0
    for line in USAGE.splitlines():
        found = re.match(r"wordcast (\w+)(.*?)(?:\s{2,}|$)", line)
        if not found or found.group(1) not in commands:
            continue
        command = found.group(1)
        # "deadletters | replay ID... | replay --all": each | may name another command.
        for part in found.group(2).split("|"):
            words = part.split()
            if words and words[0] in commands:
                command, part = words[0], part.replace(words[0], "", 1)
            actions = _options(commands[command])
            optional = set(re.findall(r"\[[^\]]*?(--[\w-]+)", part))
            form = re.match(r"\s*(--[\w-]+)", part)  # the option that chooses the line's form
            for option in re.findall(r"--[\w-]+", part):
                assert option in actions, f"{line.strip()!r}: wordcast {command} has no {option}"
                if option not in optional and (form is None or option != form.group(1)):
                    assert actions[option].required, f"{line.strip()!r}: {option} is optional"
                checked += 1
    assert checked >= 10


def test_the_usage_shows_up_keeping_its_data() -> None:
    assert "--data-dir" in USAGE


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["publish", "--batch", "0", "x"], "argument --batch: must be from 1 to 1000 (got 0)"),
        (["no-such-command"], "unknown command 'no-such-command'"),
        (["subscribr", "x"], "unknown command 'subscribr': did you mean subscribe"),
        (["stream", "craete"], "unknown action 'craete': did you mean create?"),
        (["endpoint", "frob"], "invalid choice: 'frob'"),
    ],
)
def test_a_refused_command_line_says_so_in_the_one_error_style(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("wordcast: error: ")
    assert says in err
    assert err.rstrip().endswith("--help)")
    assert "usage:" not in err


def _nested(name: str, parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A command and its own commands (``endpoint list``), by the words that run each."""
    found = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for inner, inner_parser in action.choices.items():
                found.update(_nested(f"{name} {inner}", inner_parser))
    return found


def test_every_command_is_in_the_overview_and_explains_each_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`wordcast --help` names every command; each command's own --help (a command's commands'
    too) says what it does and what each of its options and arguments is for."""
    overview = {line.split()[1] for line in USAGE.splitlines() if line.startswith("wordcast ")}
    overview |= set(re.findall(r"\| (\w+)", USAGE))  # "router | matcher | receiver"
    checked = 0
    for top, top_parser in _commands().items():
        assert top in overview, f"wordcast --help does not name `wordcast {top}`"
        for name, parser in _nested(top, top_parser).items():
            assert parser.description, f"wordcast {name} --help says nothing of what it does"
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                    continue
                what = action.option_strings or [action.dest]
                assert action.help, f"wordcast {name}: {what[-1]} has no help"
                checked += 1
            with pytest.raises(SystemExit) as ended:
                main([*name.split(), "--help"])
            assert ended.value.code == 0
            assert capsys.readouterr().out.startswith(f"usage: wordcast {name}")
    assert checked > 100
