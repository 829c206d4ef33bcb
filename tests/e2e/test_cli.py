"""The `wordcast` command line's own plumbing: `wordcast bench` runs what `make bench` runs."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import (
    AUTH,
    ROOT,
    Receiver,
    RunningCluster,
    eventually,
    tenant_key,
    wordcast_cli,
    wordcast_up_until,
)
from wordcast.cli.bench import BENCHMARKS, module_of
from wordcast.client import RouterClient
from wordcast.local.supervisor import free_port


def test_bench_offers_exactly_the_benchmarks_make_bench_runs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(r"^bench:(.*)$", makefile, re.MULTILINE)
    assert found is not None
    targets = [name.removeprefix("bench-") for name in found.group(1).split()]
    assert sorted(targets) == sorted(BENCHMARKS)
    for name in BENCHMARKS:
        assert f"-m {module_of(name)}\n" in makefile, name


def test_bench_runs_the_benchmark_of_the_checkout_from_anywhere(tmp_path: Path) -> None:
    result = wordcast_cli("bench", "migration", "--help", timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"in {ROOT}: -m bench.migration --help" in result.stdout
    assert "usage: migration.py" in result.stdout


def test_bench_refuses_an_unknown_benchmark_naming_the_known_ones() -> None:
    result = wordcast_cli("bench", "speed")
    assert result.returncode == 2
    assert "invalid choice: 'speed'" in result.stderr
    assert all(f"'{name}'" in result.stderr for name in BENCHMARKS)


def _without_corpus(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return wordcast_cli(*args, env={"WORDCAST_CORPUS_DIR": str(tmp_path)})


def test_up_without_the_corpus_says_so_before_starting_anything(tmp_path: Path) -> None:
    result = _without_corpus(tmp_path, "up", "--port", str(free_port()))
    assert result.returncode == 2
    assert result.stderr == (
        f"wordcast: error: the demo needs the pypi corpus: no pypi_summaries.tsv.gz in {tmp_path} "
        "(WORDCAST_CORPUS_DIR); or start without it: --no-demo\n"
    )
    assert result.stdout == ""  # no Redis, router or matcher was started


def test_corpus_options_without_the_corpus_fail_with_a_message_not_a_traceback(
    tmp_path: Path,
) -> None:
    expected = f"wordcast: error: no pypi_summaries.tsv.gz in {tmp_path} (WORDCAST_CORPUS_DIR)\n"
    # The router is never reached: the posts are drawn before anything is sent.
    router = ["--router", "http://127.0.0.1:9"]
    for args in (
        ["publish", "--corpus", "3", *router],
        ["subscribe", "--from-corpus", "3", "--callback", "http://127.0.0.1:9/hook", *router],
    ):
        result = _without_corpus(tmp_path, *args)
        assert (result.returncode, result.stderr) == (2, expected), args


def test_up_with_an_unreachable_or_malformed_redis_url_says_so_and_starts_nothing() -> None:
    for url, expected in (
        ("redis://127.0.0.1:1/0", "cannot reach Redis at redis://127.0.0.1:1/0 (REDIS_URL): "),
        ("localhost:6379", "REDIS_URL 'localhost:6379' is not a Redis URL: "),
    ):
        result = wordcast_cli("up", "--no-demo", "--port", str(free_port()), env={"REDIS_URL": url})
        assert result.returncode == 2
        assert result.stderr.startswith(f"wordcast: error: {expected}"), result.stderr
        assert result.stdout == ""  # no matcher or router was started to retry for ever


def test_a_spark_job_refusing_its_corpus_is_a_wordcast_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tsv"
    result = wordcast_cli("termstats", "--corpus", str(missing), "--out", "o", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        2,
        f"wordcast: error: no such corpus file: {missing} (give pypi, debian or a TSV path)\n",
    )


def test_up_on_a_port_in_use_says_so_before_starting_anything() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = wordcast_cli("up", "--no-demo", "--port", str(port), env={"MAKELEVEL": ""})
        under_make = wordcast_cli("up", "--no-demo", "--port", str(port), env={"MAKELEVEL": "1"})
    assert result.returncode == 2
    assert result.stderr == (
        f"wordcast: error: the router cannot listen on port {port} (Address already in use); "
        "give another with --port P\n"
    )
    assert result.stdout == ""
    # Under `make run`, the way to another port is make's variable.
    assert under_make.returncode == 2
    assert under_make.stderr.endswith("give another with make run PORT=P\n")


def test_a_service_with_a_bad_setting_names_the_variable_instead_of_a_traceback() -> None:
    for command, variable, value, problem in (
        ("router", "WORDCAST_ROUTER_PORT", "abc", "Input should be a valid integer"),
        ("router", "WORDCAST_ENVIRONMENT", "prod", "Input should be 'development' or 'production'"),
        ("matcher", "WORDCAST_MATCHER_DELIVERY_BATCH", "0", "Input should be greater than or"),
        ("receiver", "WORDCAST_RECEIVER_PORT", "x", "Input should be a valid integer"),
    ):
        result = wordcast_cli(command, env={variable: value, "WORDCAST_MATCHER_ORDINAL": "0"})
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"wordcast: error: {variable}={value!r}: {problem}")
        assert "Traceback" not in result.stderr


def test_up_refuses_a_data_dir_it_cannot_use_and_too_many_matchers(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for args, expected in (
        (["--data-dir", str(a_file)], f"cannot keep Redis data in --data-dir {a_file}: "),
        (["--matchers", "65"], "--matchers must be 1 to 64 for a local cluster"),
        (["--matchers", "0"], "--matchers must be 1 to 64 for a local cluster"),
    ):
        result = wordcast_cli("up", "--no-demo", "--port", str(free_port()), *args)
        assert result.returncode == 2
        assert result.stderr.startswith(f"wordcast: error: {expected}"), result.stderr
        assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["publish", "--batch", "0", "hi"], "argument --batch: must be from 1 to 1000 (got 0)"),
        (["publish", "--batch", "1001", "hi"], "argument --batch: must be from 1 to 1000"),
        (["publish", "--corpus", "-3"], "argument --corpus: must be at least 1 (got -3)"),
        (["publish", "--corpus", "ten"], "argument --corpus: 'ten' is not a whole number"),
        (
            ["subscribe", "--from-corpus", "-2", "--callback", "http://127.0.0.1:9/hook"],
            "argument --from-corpus: must be at least 1 (got -2)",
        ),
        (["up", "--port", "70000"], "argument --port: must be from 1 to 65535 (got 70000)"),
        (["up", "--demo-rate", "0"], "argument --demo-rate: must be a number above 0 (got 0)"),
        (["drain", "--timeout", "nan"], "argument --timeout: must be a number above 0 (got nan)"),
        (["termstats", "--limit", "0", "--out", "x"], "argument --limit: must be at least 1"),
    ],
)
def test_numbers_out_of_range_are_refused_before_anything_runs(args: list[str], says: str) -> None:
    result = wordcast_cli(*args)
    assert result.returncode == 2
    assert says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_publishing_to_a_router_never_reached_fails_without_sending_again() -> None:
    # Progress is on (more posts than a batch), so a batch sent again would say so.
    result = wordcast_cli(
        "publish", "--batch", "1", "one", "two", router=f"http://127.0.0.1:{free_port()}"
    )
    assert result.returncode == 2
    assert "wordcast: error: cannot reach the router" in result.stderr
    assert "again in" not in result.stderr


def _subscribed(cluster: RunningCluster, receiver: Receiver, query: str) -> str:
    created = httpx.post(
        f"{cluster.router_url}/subscriptions",
        json={"query": query, "callback_url": receiver.hook},
        headers=AUTH,
    )
    assert created.status_code == 201
    return str(created.json()["id"])


def test_publish_reads_json_lines_and_refuses_a_bad_one_whole(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    sub_id = _subscribed(cluster, receiver, "capybara")

    def matched() -> set[str]:
        return {p for s, p in receiver.pairs() if s == sub_id}

    def publish(lines: str) -> subprocess.CompletedProcess[str]:
        return wordcast_cli("publish", "--json", router=cluster.router_url, stdin=lines)

    for lines, says in (
        ('{"id": "bad-1", "text": "capybara"}\nnot json\n', "line 2: not JSON"),
        ('{"txt": "capybara"}\n', 'line 1: not an object with a "text" string'),
        ('{"text": "capybara", "when": 1}\n', "line 1: unknown field 'when'"),
        ('{"id": 7, "text": "capybara"}\n', 'line 1: "id" must be a non-empty string'),
    ):
        refused = publish(lines)
        assert refused.returncode == 2
        assert refused.stderr.startswith(f"wordcast: error: standard input {says}")
        assert refused.stderr.endswith("; nothing was published\n")
    good = publish(
        '{"id": "cap-1", "text": "A capybara swims"}\n\n'
        '{"text": "Capybaras everywhere"}\n{"id": "cap-3", "text": "no rodent here"}\n'
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout == "3 publications accepted\n"
    eventually(lambda: len(matched()) >= 2, what="the matches of the two good lines")
    # Accepted publications' messages are in the outboxes: once they are empty, none is to come.
    eventually(lambda: cluster.pending_deliveries() == 0, what="every delivery made")
    ids = matched()
    assert len(ids) == 2
    assert "cap-1" in ids
    assert "bad-1" not in ids
    both = wordcast_cli("publish", "--json", "text", router=cluster.router_url)
    assert both.returncode == 2
    assert "--json reads publications from standard input" in both.stderr


def test_publish_gives_attributes_that_filters_read(
    cluster: RunningCluster, receiver: Receiver
) -> None:
    sub_id = _subscribed(cluster, receiver, "wombat source:rss tags:zoo")
    router = cluster.router_url
    for attrs, pub in (([], "w-0"), (["source=rss"], "w-1"), (["source=rss", "tags=zoo"], "w-2")):
        lines = f'{{"id": "{pub}", "text": "a wombat digs"}}\n'
        args = [f"--attr={a}" for a in attrs]
        published = wordcast_cli("publish", *args, router=router, stdin=lines.replace('"', "'"))
        assert published.returncode == 0, published.stderr
    given = wordcast_cli(
        "publish", "--attr=source=rss", "--attr=tags=zoo", "--attr=tags=pen", "wombat w-3",
        router=router,
    )  # fmt: skip
    assert given.returncode == 0, given.stderr
    eventually(lambda: len({p for s, p in receiver.pairs() if s == sub_id}) >= 2, what="2 matches")
    eventually(lambda: cluster.pending_deliveries() == 0, what="every delivery made")
    assert len([p for s, p in receiver.pairs() if s == sub_id]) == 2
    bad = wordcast_cli("publish", "--attr=nope", "text", router=router)
    assert bad.returncode == 2
    assert "--attr 'nope': give NAME=VALUE" in bad.stderr
    refused = wordcast_cli("publish", "--attr=Source=rss", "text", router=router)
    assert refused.returncode != 0
    assert "should match pattern" in refused.stderr


def test_make_run_takes_a_port_and_installs_only_what_running_needs(tmp_path: Path) -> None:
    """`make run PORT=…` (what the README says), set up in a fresh environment: wordcast alone,
    not the dev tools or PySpark, with pip's progress shown."""
    planned = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "run", "PORT=18555", f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    installs = [line for line in planned.splitlines() if " install " in line]
    assert installs, planned
    assert not any("dev" in line or "spark" in line or "--quiet" in line for line in installs)
    assert any(line.rstrip().endswith("-e .") for line in installs), installs
    assert planned.splitlines()[-1].endswith("wordcast up --port 18555")


def _demo_until_registered(data: Path, port: int) -> tuple[list[str], int]:
    """`wordcast up --data-dir` with a small demo, stopped once its subscriptions are in: what
    it printed, and how many subscriptions the development tenant then held."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    args = ("--data-dir", str(data), "--port", str(port), "--demo-subscriptions", "20")
    with wordcast_up_until("subscriptions registered", *args, env=env) as seen:
        if seen and "subscriptions registered" in seen[-1]:
            return seen, asyncio.run(_count_subscriptions(f"http://127.0.0.1:{port}"))
    raise AssertionError("the demo did not register:\n" + "".join(seen[-30:]))


async def _count_subscriptions(router: str) -> int:
    async with RouterClient(router) as client:
        return len([sub async for sub in client.subscriptions()])


def test_the_demo_started_again_on_its_data_dir_holds_one_set_of_subscriptions(
    tmp_path: Path,
) -> None:
    port = free_port()
    first, held = _demo_until_registered(tmp_path, port)
    assert not any("previous demo" in line for line in first)
    second, held_again = _demo_until_registered(tmp_path, port)
    assert held_again == held > 20
    deleted = [line for line in second if "subscriptions of the previous demo deleted" in line]
    assert deleted, "".join(second[-30:])
    recorded = json.loads((tmp_path / "demo-subscriptions.json").read_text())
    assert f"demo: {len(recorded)} subscriptions of the previous demo deleted" in deleted[0]


def test_subscriptions_are_listed_sorted_and_filtered(cluster: RunningCluster) -> None:
    key = tenant_key(cluster, "lister")
    queries = ["zebra web", "apple web", "Mango", "banana split"]
    for query in queries:
        made = httpx.post(
            f"{cluster.router_url}/subscriptions",
            json={"query": query},
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert made.status_code == 201, made.text
    env = {"WORDCAST_API_KEY": key}
    listed = wordcast_cli("subscriptions", "--json", router=cluster.router_url, env=env)
    assert [json.loads(line)["query"] for line in listed.stdout.splitlines()] == sorted(
        queries, key=str.casefold
    )
    matched = wordcast_cli("subscriptions", "--match", "WEB", router=cluster.router_url, env=env)
    assert matched.returncode == 0, matched.stderr
    lines = matched.stdout.splitlines()
    assert len(lines) == 2
    assert "apple web" in lines[0]
    assert "zebra web" in lines[1]
    assert "of 4 subscriptions, these hold 'WEB':" in matched.stderr
    assert "2 subscriptions" in matched.stderr


def test_ctrl_c_stops_a_command_without_a_traceback() -> None:
    """`wordcast publish` waiting on its standard input, interrupted: the shell's code for an
    interrupt, and no traceback (issue 57)."""
    waiting = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "publish", "--router", "http://127.0.0.1:9"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # imported and reading
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 130
    assert "Traceback" not in err


def test_a_reader_that_goes_away_is_not_an_unreachable_router() -> None:
    """Output piped into `head`, which stops reading: the command stops quietly, not with
    "cannot reach the router … Broken pipe" (issue 57)."""
    from wordcast.cli.common import against_router

    async def writes_to_a_closed_pipe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    async def cannot_connect() -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(BrokenPipeError):
        against_router("http://127.0.0.1:9", writes_to_a_closed_pipe())
    _, error = against_router("http://127.0.0.1:9", cannot_connect())
    assert error is not None
    assert error.startswith("cannot reach the router")


def test_publish_waiting_on_a_terminal_says_so_and_ctrl_c_stops_it_quietly() -> None:
    """``wordcast publish`` with nothing to publish reads standard input: at a terminal it says
    so (a silent wait looks hung), and Ctrl-C then ends it without a traceback (issue 57)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "publish", "--router", "http://127.0.0.1:1"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(terminal)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("reading a publication's text a line from standard input"), first
        assert "Ctrl-D ends it" in first
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=30)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "Traceback" not in rest


def test_the_receiver_says_where_it_listens() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "receiver", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
    finally:
        process.terminate()
        process.wait(10)
    assert first.startswith(f"receiving webhooks at http://127.0.0.1:{port}/"), first
