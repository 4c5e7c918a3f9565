"""Fixtures of the Python SDK's suites: a fake daemon (test_fake.py) and a real one (test_daemon.py).

The SDK is imported from the source tree (sdk/python/src), so the suite tests the code as it is
checked in; test_install.py checks the installed package separately.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from fake_server import FakeDaemon  # noqa: E402


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A directory that looks like a Store to the SDK (it has the LAYERFS marker)."""
    d = tmp_path / "store"
    d.mkdir()
    (d / "LAYERFS").write_text("LayerFS store\n")
    return d


@pytest.fixture
def fake(store_dir: Path) -> Iterator[FakeDaemon]:
    d = FakeDaemon(str(store_dir))
    yield d
    d.stop()


def layerfs_bin() -> str:
    b = os.environ.get("LAYERFS")
    if not b or not os.access(b, os.X_OK):
        pytest.fail("test_daemon.py needs $LAYERFS: the built layerfs program (ctest sets it)", pytrace=False)
    return b


def kill_daemon(store: Path) -> None:
    """Unmounts what the Store's daemon still has mounted and ends it, by its pid file."""
    pid_file = store / "layerfsd.pid"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        mp = fields[1].replace("\\040", " ")
        if fields[2].startswith("fuse") and mp.startswith(str(store.parent) + "/"):
            subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(500):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)


def protocol_verbs(store: Path) -> dict[str, dict[str, object]]:
    """The daemon's verbs with their argument types and required arguments, from the verb table
    itself: `layerfs mcp` publishes every protocol verb as a tool whose input schema is made from
    the verb's argument specs (src/cli/verb.h)."""
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    out = subprocess.run([layerfs_bin(), "--store", str(store), "mcp"], input="".join(json.dumps(m) + "\n" for m in msgs),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    tools = [json.loads(line) for line in out.stdout.splitlines()][-1]["result"]["tools"]
    return {t["name"]: {"args": {k: v["type"] for k, v in t["inputSchema"]["properties"].items()},
                        "required": sorted(t["inputSchema"].get("required", []))} for t in tools}


@pytest.fixture
def real_store(tmp_path: Path) -> Iterator[Path]:
    """A fresh Store made with the real `layerfs init`; its daemon and mounts end with the test."""
    layerfs_bin()
    path = tmp_path / "store"
    yield path
    kill_daemon(path)
