"""A config file another user could have written is not read: it would choose the store, the CA
bundle and the contact of the crawl. Tested with the real command line in a folder of its own;
each refusal has its control, the same file with safe permissions, which is read (``status``
then names the store the file chose)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import run_cli


def _folder_with_config(tmp_path: Path) -> tuple[Path, Path]:
    chosen = tmp_path / "chosen-by-the-file.db"
    (tmp_path / "politecrawl.toml").write_text(f'db = "{chosen}"\n')
    return tmp_path / "politecrawl.toml", chosen


def _status(cwd: Path, *args: str):
    return run_cli(*args, "status", cwd=str(cwd), timeout=60)


def test_a_world_writable_config_is_refused(tmp_path):
    config, chosen = _folder_with_config(tmp_path)
    config.chmod(0o644)
    read = _status(tmp_path)  # the control: the file is read, its store named
    assert str(chosen) in read.stderr + read.stdout, read.stderr

    config.chmod(0o666)
    for args in ((), ("--config", str(config))):  # found in the folder, or named
        refused = _status(tmp_path, *args)
        assert refused.returncode == 2
        assert refused.stderr.strip() == (
            f"politecrawl: error: config file {config} is writable by every user: not read (chmod o-w {config})"
        )
        assert str(chosen) not in refused.stderr


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give the file away")
def test_a_config_in_the_working_folder_owned_by_another_user_is_refused(tmp_path):
    config, chosen = _folder_with_config(tmp_path)
    config.chmod(0o644)
    os.chown(config, 65534, 65534)  # nobody
    refused = _status(tmp_path)
    assert refused.returncode == 2 and "belongs to another user: not read" in refused.stderr
    named = _status(tmp_path, "--config", str(config))  # the control: named, it is trusted
    assert str(chosen) in named.stderr + named.stdout and "belongs to another user" not in named.stderr


def test_a_config_nested_a_hundred_thousand_deep_is_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    out = run_cli("--config", str(deep), "status", timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    expected = f"politecrawl: error: config file {deep} is nested too deeply to be a politecrawl config"
    assert out.stderr.strip() == expected
    shallow = tmp_path / "shallow.toml"
    shallow.write_text("a = " + "[" * 10 + "]" * 10 + "\n")  # the control: the same shape, shallow, parses
    out = run_cli("--config", str(shallow), "status", timeout=60)
    assert "nested too deeply" not in out.stderr and "unknown setting 'a'" in out.stderr
