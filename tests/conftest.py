"""What every test shares: a record of local clusters kept apart from a developer's, and the
output of a failing test's clusters in its report. The end-to-end fixtures are in
``tests/e2e/conftest.py``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from tests.helpers import RunningCluster

# Every `wordcast up` the tests start records its Redis for the other commands
# (wordcast.local.record): kept apart from the record of a cluster a developer runs.
os.environ["WORDCAST_STATE_DIR"] = tempfile.mkdtemp(prefix="wordcast-test-state-")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test shows what its clusters printed: a matcher's traceback or warning is often
    the only account of why a request between two processes failed."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        if isinstance(value, RunningCluster):
            report.sections.append((f"output of cluster {name}", "".join(value.output[-300:])))
