"""`wordcast watch` against a running cluster: it shows exactly the matches the oracle finds, as
the match stream carries them (by default) or as they are delivered to its own webhook
(--webhook, which refuses deliveries its subscriptions did not sign), and deletes its
subscriptions when stopped with Ctrl-C or after --count matches."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import boolean_oracle, pattern_oracle, publish_posts
from tests.helpers import RunningCluster, eventually
from wordcast.corpus.workload import (
    Post,
    post_boolean_queries,
    post_patterns,
    post_queries,
    sample_posts,
)
from wordcast.local.supervisor import free_port

AUTH = {"authorization": "Bearer wck_development_only"}
SHOWN = re.compile(r"^(?P<label>'[^']*'|\"[^\"]*\")\s+<- (?P<text>.*)$")


def _shown(line: str) -> tuple[str, str] | None:
    found = SHOWN.match(line.rstrip("\n"))
    if found is None:
        return None
    return ast.literal_eval(found["label"]), ast.literal_eval(found["text"])


def _as_shown(text: str) -> str:
    return " ".join(text.split())[:100]


@contextlib.contextmanager
def _watch(
    cluster: RunningCluster, port: int | None, *args: str
) -> Iterator[subprocess.Popen[str]]:
    """A running `wordcast watch` (with a webhook on ``port`` if given, else on the match
    stream), killed on the way out if it has not ended by then."""
    where = ["--router", cluster.router_url]
    if port is not None:
        where += ["--webhook", "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "wordcast", "watch", *args, *where],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # a Ctrl-C of its own, not the test run's
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()


def _read_until(process: subprocess.Popen[str], lines: list[str], needle: str) -> None:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while not any(needle in line for line in lines):
        line = process.stdout.readline()
        assert line, "watch exited early:\n" + "".join(lines)
        lines.append(line)
        assert time.monotonic() < deadline, "".join(lines)


def _registered(cluster: RunningCluster) -> set[str]:
    listing = httpx.get(f"{cluster.router_url}/subscriptions", headers=AUTH, timeout=10).json()
    return {str(s.get("query") or s.get("pattern")) for s in listing["subscriptions"]}


def _watched_and_expected(
    seed: int,
) -> tuple[list[Post], list[str], list[str], Counter[tuple[str, str]]]:
    """Posts, 3 queries and a pattern with a handful of matches each, and the matches shown."""
    posts = list({p.text: p for p in sample_posts(1_500, seed=seed)}.values())
    candidates = post_queries(posts, 40, seed=81) + post_boolean_queries(posts, 20, seed=82)
    oracle = boolean_oracle({q: q for q in candidates}, posts)
    hits = Counter(label for label, _ in oracle)
    # A handful of matches each: enough to judge, few enough to read.
    queries = [q for q in candidates if 2 <= hits[q] <= 40][:3]
    patterns = post_patterns(posts, 1, seed=83)
    assert len(queries) == 3
    by_id = {p.id: p for p in posts}
    expected = Counter(
        (label, _as_shown(by_id[post_id].text))
        for label, post_id in oracle | pattern_oracle({patterns[0]: patterns[0]}, posts)
        if label in queries or label == patterns[0]
    )
    return posts, queries, patterns, expected


def _read_shown(
    process: subprocess.Popen[str], lines: list[str], expected: Counter[tuple[str, str]]
) -> None:
    assert process.stdout is not None
    while sum(_shown(line) is not None for line in lines) < sum(expected.values()):
        line = process.stdout.readline()  # the watch ends by itself after --seconds
        assert line, "".join(lines)
        lines.append(line)


def _publish_and_stop(
    cluster: RunningCluster,
    process: subprocess.Popen[str],
    posts: list[Post],
    lines: list[str],
    expected: Counter[tuple[str, str]],
) -> None:
    """Publish, read until the matches expected are shown, Ctrl-C the watch: it ends cleanly,
    having shown exactly them."""
    publish_posts(cluster, posts)
    _read_shown(process, lines, expected)
    # Nothing more can come once every outbox is empty (each message delivered, or in the match
    # stream) and a last publication's match, which comes after any earlier one, is shown.
    eventually(lambda: cluster.pending_deliveries() == 0, what="every delivery made")
    shown_texts = {text for _, text in expected}
    last = next(p for p in posts if _as_shown(p.text) in shown_texts)
    marker = f"lastmark{os.getpid()}"
    publish_posts(cluster, [Post(f"{last.id}-last", f"{marker} {last.text}")])
    _read_until(process, lines, marker)
    os.killpg(process.pid, signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    lines += rest.splitlines(keepends=True)
    assert process.returncode == 0, "".join(lines)
    shown = Counter(
        found for line in lines if (found := _shown(line)) is not None and marker not in line
    )
    assert shown == expected


def test_watch_on_the_match_stream_shows_the_oracles_matches_and_cleans_up(
    cluster: RunningCluster,
) -> None:
    posts, queries, patterns, expected = _watched_and_expected(707)
    lines: list[str] = []
    with _watch(cluster, None, *queries, "--pattern", patterns[0], "--seconds", "120") as process:
        _read_until(process, lines, "watching 4 subscriptions on the match stream")
        assert set(queries) | set(patterns) <= _registered(cluster)
        _publish_and_stop(cluster, process, posts, lines, expected)
    assert any("deleted the 4 subscriptions of this watch" in line for line in lines)
    assert not (set(queries) | set(patterns)) & _registered(cluster)


def test_watch_with_a_webhook_shows_the_oracles_matches_refuses_forgeries_and_cleans_up(
    cluster: RunningCluster,
) -> None:
    posts, queries, patterns, expected = _watched_and_expected(808)
    port = free_port()
    lines: list[str] = []
    with _watch(cluster, port, *queries, "--pattern", patterns[0], "--seconds", "120") as process:
        _read_until(process, lines, "watching 4 subscriptions")
        assert f"http://127.0.0.1:{port}/hook" in lines[-1]
        assert set(queries) | set(patterns) <= _registered(cluster)

        hook = f"http://127.0.0.1:{port}/hook"
        forged = {
            "webhook-id": "msg_forged",
            "webhook-timestamp": str(int(time.time())),
            "webhook-signature": "v1,bm90IGEgc2lnbmF0dXJl",
        }
        body = {"matches": [{"subscription_id": "x", "publication_id": "p", "text": "forged"}]}
        assert httpx.post(hook, json=body, headers=forged, timeout=10).status_code == 401
        assert httpx.post(hook, content=b"{}", timeout=10).status_code == 400

        _publish_and_stop(cluster, process, posts, lines, expected)
    assert any("refused a delivery" in line for line in lines)
    assert "forged" not in "".join(lines)
    assert any("deleted the 4 subscriptions of this watch" in line for line in lines)
    assert not (set(queries) | set(patterns)) & _registered(cluster)


def test_watch_stops_after_count_matches(cluster: RunningCluster) -> None:
    posts = sample_posts(300, seed=909)
    candidates = post_queries(posts, 30, seed=91)
    hits = Counter(label for label, _ in boolean_oracle({q: q for q in candidates}, posts))
    query = max(candidates, key=lambda q: hits[q])
    assert hits[query] >= 3
    lines: list[str] = []
    with _watch(cluster, None, query, "--count", "3", "--seconds", "120") as process:
        _read_until(process, lines, "watching 1 subscription ")
        publish_posts(cluster, posts)
        out, _ = process.communicate(timeout=90)
    lines += out.splitlines(keepends=True)
    assert process.returncode == 0, "".join(lines)
    assert sum(_shown(line) is not None for line in lines) == 3
    assert "3 matches shown" in lines[-1]
    assert query not in _registered(cluster)


def test_watch_keeps_its_subscriptions_when_asked_and_names_them(cluster: RunningCluster) -> None:
    query = "keep watching this rare conjunction"
    with _watch(cluster, None, query, "--seconds", "1", "--keep") as process:
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out
    [kept] = [line for line in out.splitlines() if line.startswith("kept the subscriptions")]
    sub_id = kept.split(": ")[1]
    held = httpx.get(f"{cluster.router_url}/subscriptions/{sub_id}", headers=AUTH, timeout=10)
    assert held.status_code == 200
    assert held.json()["query"] == query
    httpx.delete(f"{cluster.router_url}/subscriptions/{sub_id}", headers=AUTH, timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give at least one QUERY or --pattern PATTERN"),
        (["python", "--count", "0"], "--count must be positive"),
        (["python", "--seconds", "-1"], "--seconds must be positive"),
        (["python", "--port", "8000"], "--port is for the webhook of --webhook"),
    ],
)
def test_watch_refuses_clearly(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wordcast", "watch", *args, "--seconds", "5"]
        if "--seconds" not in args
        else [sys.executable, "-m", "wordcast", "watch", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["subscribe", "python", "--callback", "http://example.com/hook"],
        ["publish", "some text"],
        ["watch", "python"],
        ["subscriptions"],
        ["unsubscribe", "--all"],
    ],
)
def test_an_unreachable_router_is_a_clear_error(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wordcast", *command, "--router", "http://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        "wordcast: error: cannot reach the router at http://127.0.0.1:1"
    )
    assert "Traceback" not in result.stderr


def _first_screen() -> list[list[str]]:
    """The wordcast commands of README's first example, in order, as a user types them."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Your first match", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [command for command in commands if command and command[0] == "wordcast"]


def test_the_readmes_first_screen_as_written(cluster: RunningCluster) -> None:
    """Watch, publish and dry-run as README's first screen types them (its `make run`'s
    cluster is this one): the published text shows in the watch, the dry run names its match,
    and Ctrl-C takes the subscription away."""
    watch, publish, dry_run = _first_screen()
    env = os.environ | {"PYTHONUNBUFFERED": "1", "WORDCAST_URL": cluster.router_url}
    process = subprocess.Popen(
        [sys.executable, "-m", *watch],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        lines: list[str] = []
        _read_until(process, lines, "watching 1 subscription ")
        published = subprocess.run(
            [sys.executable, "-m", *publish], capture_output=True, text=True, env=env, timeout=60
        )
        assert published.returncode == 0, published.stderr
        _read_until(process, lines, publish[-1])
        tried = subprocess.run(
            [sys.executable, "-m", *dry_run], capture_output=True, text=True, env=env, timeout=60
        )
        assert tried.returncode == 0, tried.stderr
        assert len(tried.stdout.splitlines()) == 1
        assert "1 match in 1 publication" in tried.stderr
        os.killpg(process.pid, signal.SIGINT)
        process.communicate(timeout=60)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert watch[-1] not in _registered(cluster)
