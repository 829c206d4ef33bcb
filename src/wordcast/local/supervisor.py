"""Processes that run as services: started, their output forwarded with a name prefix, restarted
when they die (as a StatefulSet would), and stopped in reverse order (Redis last).

Children ask the kernel to end them if the supervisor itself dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from wordcast.backoff import Backoff

# A service that exits is started again after 0.2 s, doubling with each restart up to 5 s.
RESTART_FIRST_S = 0.2
RESTART_MOST_S = 5.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int) -> OSError | None:
    """Why the router could not listen on 127.0.0.1:``port``, or None if it can (as uvicorn binds:
    with SO_REUSEADDR, so a port left in TIME_WAIT counts as free)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc
    return None


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str]
    ready: Callable[[], bool]
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0
    # Wait at least this long before starting it again: a Redis Cluster master must stay away
    # until its replica has taken over (else it comes back with the writes it had not fsynced
    # lost, and the replica, resyncing from it, loses them too).
    restart_after_s: float = 0.0
    restart_due: float = 0.0  # when the dead process is started again (0: not dead)
    _pump: threading.Thread | None = field(default=None, repr=False)


def http_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    return check


class Supervisor:
    """Runs services, each a process of its own; see the module docstring."""

    def __init__(self, out: Callable[[str], None] | None = None) -> None:
        self._out = out or (lambda line: print(line, flush=True))
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")
        self.services: list[Service] = []
        self._monitor: threading.Thread | None = None

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    def start_watching(self) -> None:
        self._monitor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
        self._monitor.start()

    def _spawn(self, service: Service) -> None:
        """Start ``service``'s process, always from the one spawner thread.

        A child asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG), and the
        kernel takes the parent to be the *thread* that forked it: a service restarted from
        the watch thread, or started by a scaling worker, was sent SIGTERM as soon as that
        thread ended. On Ctrl-C the watch thread ends first, so a Redis restarted under
        ``wordcast up`` stopped before the matchers, which could then not hand on their
        unfinished deliveries. The spawner thread lives until every service is stopped.
        """
        self._spawner.submit(self._popen, service).result()

    def _popen(self, service: Service) -> None:
        env = os.environ | service.env | {"PYTHONUNBUFFERED": "1"}
        service.process = subprocess.Popen(
            service.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        service.started_at = time.monotonic()
        service._pump = threading.Thread(
            target=self._forward, args=(service, service.process), daemon=True
        )
        service._pump.start()

    def _forward(self, service: Service, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        prefix = f"[{service.name}] "
        for raw in process.stdout:
            self._out(prefix + raw.decode("utf-8", "replace").rstrip())

    def _wait_ready(self, service: Service, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if service.process is not None and service.process.poll() is not None:
                raise RuntimeError(
                    f"{service.name} exited with code {service.process.returncode} while starting"
                )
            if service.ready():
                return
            time.sleep(0.05)
        raise TimeoutError(f"{service.name} was not ready within {timeout:.0f}s")

    def _watch(self) -> None:
        """Restart any service that dies, with a growing pause if it keeps dying."""
        while not self._stopping.wait(0.2):
            for service in list(self.services):
                process = service.process
                if process is None or process.poll() is None:
                    continue
                with self._lock:
                    if self._stopping.is_set():
                        return
                    if service not in self.services:  # stopped by scaling down
                        continue
                    if not service.restart_due:
                        backoff = Backoff(RESTART_FIRST_S, RESTART_MOST_S)
                        backoff.failures = service.restarts
                        pause = max(backoff.delay_s, service.restart_after_s)
                        self._out(
                            f"[supervisor] {service.name} exited with code "
                            f"{process.returncode}; restarting in {pause:.1f} s"
                        )
                        if time.monotonic() - service.started_at > 30:
                            service.restarts = 0
                        service.restarts += 1
                        service.restart_due = time.monotonic() + pause
                    if time.monotonic() < service.restart_due:
                        continue  # the others are watched meanwhile
                    service.restart_due = 0.0
                    self._spawn(service)

    def _stop_processes(self, removed: list[Service]) -> None:
        """SIGTERM them all at once (each may take its drain time), SIGKILL what outlives 15 s."""
        started = time.monotonic()
        for service in removed:
            if service.process is not None and service.process.poll() is None:
                service.process.terminate()
        for service in removed:
            if service.process is not None:
                try:
                    service.process.wait(max(0.1, 15 - (time.monotonic() - started)))
                except subprocess.TimeoutExpired:
                    service.process.kill()
                    service.process.wait()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every service answers its readiness probe (e.g. after a restart)."""
        for service in self.services:
            self._wait_ready(service, timeout)

    def stop_all(self) -> None:
        """Stop in reverse start order, so Redis goes last and nobody logs its absence."""
        self._stopping.set()
        with self._lock:
            for service in reversed(self.services):
                process = service.process
                if process is None or process.poll() is not None:
                    continue
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._spawner.shutdown()
