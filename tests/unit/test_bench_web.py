"""The benchmark web's hosts as the crawl benchmark asks for them (``bench_hosts``), and the
command that serves them (benchmarks/_benchweb.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from servers.sites import answer_range, bench_hosts

BENCHWEB = Path(__file__).resolve().parents[2] / "benchmarks" / "_benchweb.py"


def test_answer_seconds_gives_each_host_its_own_time_in_the_range():
    hosts = bench_hosts(200, answer_seconds=(0.1, 0.3))
    delays = [h.delay for h in hosts]
    assert all(0.1 <= d <= 0.3 for d in delays)
    assert len(set(delays)) == len(delays)  # each its own
    assert min(delays) < 0.12 and max(delays) > 0.28  # spread over the range
    assert [h.delay for h in bench_hosts(200, answer_seconds=(0.1, 0.3))] == delays  # the same web every run


def test_slow_hosts_keep_their_slow_delay_and_loopback_answers_at_once_by_default():
    hosts = bench_hosts(10, slow_every=5, slow_delay=0.7, answer_seconds=(0.1, 0.3))
    assert [h.delay for h in hosts][::5] == [0.7, 0.7]
    assert all(h.delay == 0.0 for h in bench_hosts(10))


def test_the_benchmark_web_command_refuses_a_malformed_answer_range(tmp_path):
    command = [sys.executable, str(BENCHWEB), "--hosts", "1", "--answer-ms", "fast", "--log", str(tmp_path / "log")]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "--answer-ms: expected LO-HI in milliseconds" in out.stderr
    assert not (tmp_path / "log").exists()  # refused before it served anything


def test_answer_range_reads_milliseconds_low_first():
    assert answer_range("100-300") == (0.1, 0.3)
    for bad in ("300-100", "fast", "100", "-5-10"):
        with pytest.raises(ValueError):
            answer_range(bad)
