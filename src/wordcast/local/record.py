"""The running local clusters' own records: what each ``wordcast up`` started (its Redis,
namespace and router), so that the commands acting on a cluster find it without ``--router`` or
``--redis-url``, and say which one they act on.

One record per cluster, ``clusters/{pid}.json`` in ``$WORDCAST_STATE_DIR`` (default
``~/.local/state/wordcast``), written once the cluster is up and removed when it stops. A record
counts only while its ``wordcast up`` is alive and is the reader's own: the process exists, runs
wordcast, and belongs to the same user (a pid reused by another process, or another user's, is
not a cluster of ours; its record is passed over). With several clusters running, no command
picks one: it asks for ``--router`` (:func:`running`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson


@dataclass(frozen=True)
class LocalCluster:
    redis_url: str
    namespace: str
    router_url: str
    pid: int


def records_dir() -> Path:
    state = os.environ.get("WORDCAST_STATE_DIR")
    base = Path(state) if state else Path.home() / ".local" / "state" / "wordcast"
    return base / "clusters"


def write(cluster: LocalCluster) -> None:
    """Record ``cluster``; a failure to (an unwritable home) only costs the convenience."""
    path = records_dir() / f"{cluster.pid}.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps(asdict(cluster)))
        temporary.replace(path)  # readers never see half a record


def running() -> list[LocalCluster]:
    """The local clusters of this user whose ``wordcast up`` is alive, oldest record first."""
    found = []
    with contextlib.suppress(OSError):
        paths = sorted(records_dir().glob("*.json"), key=lambda path: path.stat().st_mtime)
        for path in paths:
            try:
                cluster = LocalCluster(**orjson.loads(path.read_bytes()))
            except (OSError, ValueError, TypeError):
                continue
            if _ours(cluster.pid):
                found.append(cluster)
    return found


def remove(pid: int) -> None:
    """Remove the record ``pid``'s ``wordcast up`` wrote."""
    with contextlib.suppress(OSError):
        (records_dir() / f"{pid}.json").unlink()


def _ours(pid: int) -> bool:
    """Whether ``pid`` is a live wordcast process of this user."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():  # Linux: the owner and the command line tell
        try:
            return (
                proc.stat().st_uid == os.getuid() and b"wordcast" in (proc / "cmdline").read_bytes()
            )
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or someone else's
        return False
    return True
