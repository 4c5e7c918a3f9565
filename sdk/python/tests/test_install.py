"""The package installs offline with Debian's pip and setuptools (`--no-build-isolation`: nothing
is fetched), into a venv and into a target directory, and ships its type marker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1]
OFFLINE = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1",
           "PYTHONPATH": ""}


def copy_sdk(tmp_path: Path) -> Path:
    # pip builds in the source directory; a copy keeps the checkout clean.
    dst = tmp_path / "python"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".pytest_cache"))
    return dst


def check_import(python: str, extra_path: str | None = None) -> None:
    env = {**OFFLINE, "PYTHONPATH": extra_path or ""}
    code = ("import layerfs, layerfs.aio, os, sys; "
            "assert not layerfs.__file__.startswith(%r), layerfs.__file__; "
            "assert os.path.exists(os.path.join(os.path.dirname(layerfs.__file__), 'py.typed')); "
            "assert issubclass(layerfs.NotFound, layerfs.LayerFSError); "
            "print(layerfs.__file__)" % str(SRC))
    out = subprocess.run([python, "-c", code], env=env, cwd="/", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_pip_install_into_a_target(tmp_path: Path) -> None:
    src = copy_sdk(tmp_path)
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                          "--target", str(target), str(src)], env=OFFLINE, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (target / "layerfs" / "py.typed").exists()
    assert sorted(p.name for p in (target / "layerfs").glob("*.py")) == [
        "__init__.py", "_core.py", "aio.py", "client.py", "errors.py", "types.py"]
    check_import(sys.executable, str(target))


def test_pip_install_into_a_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"python3 -m venv failed (tools/setup installs python3-venv): {made.stderr}")
    src = copy_sdk(tmp_path)
    out = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", str(src)],
                         env=OFFLINE, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    check_import(str(venv / "bin" / "python"))


def test_the_package_and_a_caller_type_check_strictly(tmp_path: Path) -> None:
    # mypy is Debian's (tools/setup); the caller shows the annotations a user's checker sees.
    caller = tmp_path / "caller.py"
    caller.write_text(
        "import layerfs\n"
        "from layerfs import Store, AsyncStore, Commit, Change\n"
        "def f(s: Store) -> tuple[str, list[Commit], list[Change]]:\n"
        "    cid: str = s.commit('/mnt', 'msg')\n"
        "    log = s.log('main', max_count=3)\n"
        "    try:\n"
        "        s.fork('x', log[0].id)\n"
        "    except layerfs.NotFound as e:\n"
        "        print(e.code, e.errno, e.message)\n"
        "    return cid, log, s.diff(log[1].id, log[0].id)\n"
        "async def g(s: AsyncStore) -> bytes:\n"
        "    return await s.cat('main', 'README')\n"
        "def bad(s: Store) -> int:\n"
        "    return s.commit('/mnt', 'msg')  # a str, not an int: mypy must say so\n")
    env = {**OFFLINE, "MYPYPATH": str(SRC / "src")}
    pkg = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "-p", "layerfs"],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert pkg.returncode == 0, pkg.stdout + pkg.stderr
    use = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(caller)],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert use.returncode == 1, use.stdout + use.stderr
    assert use.stdout.count("error:") == 1 and "caller.py:14: error: Incompatible return value" in use.stdout, use.stdout
