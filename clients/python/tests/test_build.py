"""The package builds (wheel and sdist), and its wheel installs and imports
in an environment of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import HERE

ROOT = HERE.parent


def uv() -> str:
    """The uv run-tests installed (UV), or one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv") or str(ROOT / "build" / "tools" / "bin" / "uv")
    if not Path(found).exists():
        pytest.skip("uv is not installed: run ./run-tests")
    return found


def test_the_wheel_installs_and_imports(tmp_path: Path) -> None:
    """uv build makes a wheel and an sdist; the wheel's files import."""
    dist = tmp_path / "dist"
    subprocess.run([uv(), "build", "--quiet", "--out-dir", str(dist)], cwd=ROOT, check=True, timeout=300)
    (wheel,) = dist.glob("idempotency_pg-*.whl")
    assert len(list(dist.glob("idempotency_pg-*.tar.gz"))) == 1
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("__init__", "keys", "store", "outcomes", "http", "asgi", "django", "errors"):
        assert f"idempotency/{module}.py" in names
    assert "idempotency/py.typed" in names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
    assert "Name: idempotency-pg" in lines and any(x.startswith("Requires-Dist: psycopg>=3.1") for x in lines)
    # The wheel's own files import (ahead of the editable install), with the locked dependencies.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    done = subprocess.run(
        [sys.executable, "-c", "import idempotency, idempotency.asgi, idempotency.django;"
         " print(idempotency.__file__, idempotency.__version__, idempotency.mint('n', ['a']))"],
        env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == [str(site / "idempotency" / "__init__.py"), "1.0.0",
                                   "d6763a78f2ada70dc4816b3f3a68cdb7723a3970a1d84af66b2bb9e96fe4cc8b"]
