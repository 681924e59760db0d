"""The code passes ruff, lint and format (configured in pyproject.toml), so both run wherever the
tests run (CI too)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ruff() -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it comes with pip install -e '.[test]')")
    return ruff


def test_ruff_check_passes():
    out = subprocess.run([_ruff(), "check", "."], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_format_check_passes():
    """Every file is as ``ruff format`` writes it, the Python examples in the Markdown docs too
    (run ``ruff format .`` to fix)."""
    out = subprocess.run(
        [_ruff(), "format", "--check", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
