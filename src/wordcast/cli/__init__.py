"""The ``wordcast`` command line: one module per group of commands, each adding its own to the
parser (``register``): :mod:`.local` (a local cluster, single services), :mod:`.api` (talking to a
router), :mod:`.publish` (publishing and dry runs), :mod:`.endpoints` (webhook endpoints),
:mod:`.status` (the cluster, for an operator), :mod:`.tenants` (API keys and shared streams, as
admin), :mod:`.routing` (learning, scaling, draining) and :mod:`.bench`.

May import anything: it is the top of the package."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from typing import NoReturn

from wordcast.cli import api, bench, endpoints, local, publish, routing, status, tenants
from wordcast.cli.common import DEFAULT_ROUTER, default_router, fail
from wordcast.errors import WordcastError

USAGE = """\
wordcast up [--matchers N] [--port P] [--data-dir DIR] [--no-demo]
                                                    start a local cluster in the foreground
wordcast subscribe QUERY [--callback URL]           register a keyword subscription, delivered
                                                    to your match stream (wordcast watch), or
                                                    POSTed to URL (QUERY may use OR, NOT, -word,
                                                    parentheses: quote it, 'senate -house')
wordcast subscribe --pattern 'pie*tea' [--callback URL]  register a wildcard pattern
wordcast subscribe --file subs.jsonl [--callback URL]  import a JSON Lines file of subscriptions;
                                                    run again after an interruption: it resumes,
                                                    without duplicates
wordcast subscriptions [--match TEXT] [--tag T]     list your subscriptions, sorted
wordcast unsubscribe ID... | --all                  delete subscriptions
wordcast secret ID                                  rotate the signing secret of a
                                                    subscription's endpoint
wordcast endpoint list|create|show|secret|update|rotate|delete …  your webhook endpoints,
                                                    each with one signing secret, and their
                                                    health
wordcast publish TEXT... | --corpus N | --json      publish texts, corpus posts, or JSON lines
                                                    ({"id", "text"}) read from stdin; --stream S
                                                    to a shared stream; --dry-run shows what
                                                    would match, publishing nothing
wordcast watch QUERY... [--pattern P]               subscribe, show matches as they are
                                                    delivered, unsubscribe on Ctrl-C
wordcast deadletters | replay ID... | replay --all  deliveries given up on; send them again
wordcast status                                     mapping version, spread, imbalance, loads
wordcast tenant create|keys|revoke NAME [KEY_ID]    a tenant's API keys (admin token)
wordcast tenant list                                every tenant, its keys and subscriptions
wordcast stream create|list|grant|revoke|delete …   shared streams between tenants (admin)
wordcast bench NAME [ARGS]                          run a benchmark of the source checkout
wordcast learn                                      learn a routing mapping with Spark
wordcast termstats --out FILE                       term statistics with Spark (for QueryNote)
wordcast scale N                                    change the number of matchers, live
wordcast drain                                      a matcher pod's preStop hook: wait until
                                                    scaling down has emptied it
wordcast router | matcher | receiver                run one service (settings from the env)
"""


class _Parser(argparse.ArgumentParser):
    """argparse, its refusals in the one style every command's errors take (``fail``):
    ``wordcast: error: …`` and status 2, pointing at the command's help."""

    def error(self, message: str) -> NoReturn:
        fail(f"{_with_suggestion(message)} (see {self.prog} --help)")
        raise SystemExit(2)


_INVALID_CHOICE = re.compile(r"argument (.+?): invalid choice: '?([^']*)'? \(choose from (.*)\)")


def _with_suggestion(message: str) -> str:
    """argparse's refusal of a choice, said with the nearest choices instead of all of them
    (``unknown command 'subscribr': did you mean subscribe?``), or without the list of
    commands when none is near."""
    found = _INVALID_CHOICE.fullmatch(message)
    if found is None:
        return message
    what, given, listed = found.groups()
    choices = [c.strip().strip("'") for c in listed.split(",")]
    near = difflib.get_close_matches(given, choices, n=3, cutoff=0.6)
    if near:
        return f"unknown {what} {given!r}: did you mean {' or '.join(near)}?"
    # A command's list is long (the help has it); an option's few are worth naming.
    return f"unknown command {given!r}" if what == "command" else message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="wordcast", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (local, api, publish, endpoints, status, tenants, routing, bench):
        commands.register(sub)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """A command's --help opens with what it does: its own description, else its summary line
    (the one ``wordcast --help`` lists), and so on for a command's own commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for summary in action._choices_actions:
                command = action.choices[summary.dest]
                if not command.description and summary.help:
                    command.description = summary.help[0].upper() + summary.help[1:] + "."
                _describe(command)


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # Ctrl-C: the user asked to stop, whatever was running (an import, a wait on stdin,
        # an event loop's tasks): no traceback, the shell's code for an interrupt.
        print(file=sys.stderr)
        return 130


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "router", DEFAULT_ROUTER) is None:  # a command with --router, not given
        args.router = default_router()
    try:
        result: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
    except WordcastError as exc:
        # Commands report the errors they expect themselves; this is the net under the rest
        # (a missing corpus, say): a message, not a traceback.
        return fail(str(exc))
    except BrokenPipeError:
        # The reader went away (`wordcast subscriptions | head`): stop quietly, as Unix tools do,
        # and keep the interpreter's final flush from raising again (the Python docs' recipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result
