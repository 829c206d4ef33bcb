"""A learning run started from the console: ``wordcast learn`` (the Spark job of S³-TM §3.2's
SALB, Alg. 1) as a child process of this router, on the cluster's own Redis and namespace.

One run at a time per router. Routing is measured on the recent traffic before the run and again
after it (:mod:`.insight`), so the console shows the mapping before and after: spread, imbalance
and load per matcher. The new version is published by the job as ``wordcast learn`` publishes it,
and the routers move to it as to any new version. A router whose image has no Spark (``pip
install 'wordcast[spark]'``, and Java) refuses with 503 and says so, and a deployment that learns
with its CronJob can turn runs off (``WORDCAST_ROUTER_CONSOLE_LEARNING=false``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from wordcast.errors import Conflict, Unavailable
from wordcast.services.router.settings import RouterSettings

OUTPUT_LINES = 40  # the end of the job's output, kept to show
STOP_S = 5.0  # how long a run stopped with the router may take to end before it is killed


class LearningRuns:
    def __init__(
        self, settings: RouterSettings, measure: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        self._settings = settings
        self._measure = measure
        self.state = "idle"
        self.detail = ""
        self.output: deque[str] = deque(maxlen=OUTPUT_LINES)
        self.before: dict[str, Any] | None = None
        self.after: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._process: asyncio.subprocess.Process | None = None

    def figures(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "detail": self.detail,
            "output": list(self.output),
            "before": self.before,
            "after": self.after,
        }

    async def start(self) -> None:
        if self.state == "running":
            raise Conflict("a learning run is under way on this router; wait for it to end")
        if not self._settings.console_learning:
            raise Unavailable(
                "learning runs are turned off on this router (WORDCAST_ROUTER_CONSOLE_LEARNING); "
                "the cluster learns with its CronJob or wordcast learn"
            )
        if importlib.util.find_spec("pyspark") is None or shutil.which("java") is None:
            raise Unavailable(
                "this router cannot run the Spark job: it needs pyspark (pip install "
                "'wordcast[spark]') and Java 17; run wordcast learn where they are"
            )
        # Running from here, before the first await: simultaneous starts get the 409 above.
        previous = self.state, self.detail
        self.state, self.detail = "running", "learning a SALB mapping from the logged traffic"
        try:
            self.before = await self._measure()
        except BaseException:
            self.state, self.detail = previous
            raise
        self.after = None
        self.output.clear()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        argv = [sys.executable, "-m", "wordcast", "learn", "--redis-url", self._settings.redis_url]
        env = os.environ | {"WORDCAST_NAMESPACE": self._settings.namespace}
        try:
            process = self._process = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                # Its own process group: stopping the run stops the JVM that Spark starts too.
                start_new_session=True,
            )
            assert process.stdout is not None
            async for line in process.stdout:
                text = line.decode(errors="replace").rstrip()
                if not _spark_noise(text):
                    self.output.append(text)
            code = await process.wait()
        except OSError as exc:
            self.state, self.detail = "failed", f"could not start the job: {exc}"
            return
        if code != 0:
            self.state, self.detail = "failed", f"the job ended with exit status {code}"
            return
        # The routers take the new version within their refresh; measure once this one has.
        await asyncio.sleep(1.0)
        try:
            self.after = await self._measure()
        except Exception as exc:  # the run succeeded; only the measuring failed
            self.detail = f"learned, but routing could not be measured after it: {exc}"
        else:
            self.detail = "learned and published a new mapping version"
        self.state = "succeeded"

    async def aclose(self) -> None:
        """Stop a run under way: its whole process group, the Spark job's JVM with it."""
        process = self._process
        if process is not None and process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_S)
            except TimeoutError:
                _signal_group(process.pid, signal.SIGKILL)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


# What Spark and its JVM print on their own (log4j lines, start-up banners): left out of the
# output shown, which is the job's own account of the run.
SPARK_NOISE = re.compile(
    r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|DEBUG) |WARNING: |Setting default log "
    r"level|To adjust logging level|Using Spark's default log4j|\[Stage \d+|:: loading settings|"
    r"\s*$)"
)


def _spark_noise(line: str) -> bool:
    return SPARK_NOISE.match(line) is not None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # the group the run leads (start_new_session)
