"""The running local cluster's own record: what ``wordcast up`` started (its Redis, namespace and
router), so that the commands acting on a cluster (``learn``, ``term-stats``, ``scale``) find it
without ``--redis-url``.

The record is ``local-cluster.json`` in ``$WORDCAST_STATE_DIR`` (default
``~/.local/state/wordcast``), written once the cluster is up and removed when it stops; a record
whose ``wordcast up`` is no longer running (killed) is ignored. One record: the last ``wordcast
up`` started wins.
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


def record_path() -> Path:
    state = os.environ.get("WORDCAST_STATE_DIR")
    base = Path(state) if state else Path.home() / ".local" / "state" / "wordcast"
    return base / "local-cluster.json"


def write(cluster: LocalCluster) -> None:
    """Record ``cluster``; a failure to (an unwritable home) only costs the convenience."""
    path = record_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(orjson.dumps(asdict(cluster)))
        temporary.replace(path)  # readers never see half a record


def read() -> LocalCluster | None:
    """The running local cluster's record, if there is one and its ``wordcast up`` is alive."""
    try:
        found = LocalCluster(**orjson.loads(record_path().read_bytes()))
    except (OSError, ValueError, TypeError):
        return None
    return found if _alive(found.pid) else None


def remove(pid: int) -> None:
    """Remove the record if it is the one ``pid`` wrote (a later ``wordcast up`` keeps its own)."""
    found = read()
    if found is not None and found.pid == pid:
        with contextlib.suppress(OSError):
            record_path().unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
