"""The package type-checks under mypy --strict and passes ruff."""

from __future__ import annotations

import subprocess
import sys

from .conftest import HERE

ROOT = HERE.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    """Runs a tool of the environment from the package's folder."""
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_mypy_strict() -> None:
    """mypy --strict on the package and the example apps."""
    done = run("mypy", "--strict", "src/idempotency", "tests/apps/fastapi_app.py", "tests/apps/readme_app.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff() -> None:
    """ruff on everything."""
    done = run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout + done.stderr
