"""A real nginx for the tests that want a judge the project did not write.

Debian's nginx and openssl (``.ci/run`` installs them): ``need_nginx()`` skips a test with the
reason where either is absent. ``certificates`` makes a CA of the test's own and a certificate for
one loopback address signed by it; ``conf`` wraps a test's ``http { ... }`` body in what every
nginx run here needs (in the foreground, its pid, logs and temporary files in the test's folder);
``running`` starts nginx for a ``with`` block, once its address accepts connections, and stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["NGINX", "OPENSSL", "certificates", "conf", "free_port", "need_nginx", "running"]

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
OPENSSL = shutil.which("openssl")


def need_nginx() -> None:
    if NGINX is None or OPENSSL is None:
        pytest.skip("nginx and openssl are needed (Debian packages nginx, openssl; .ci/run installs them)")


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def _openssl(*args: str) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], check=True, capture_output=True, timeout=60)


def certificates(tmp: Path, ip: str, ca_name: str = "politecrawl test CA") -> tuple[Path, Path, Path]:
    """(the CA's certificate, the site's certificate, the site's key): a CA of the test's own, and
    a certificate for ``ip`` that it signed, both valid for two days."""
    ca_key, ca, key, csr, crt, ext = (tmp / n for n in ("ca.key", "ca.crt", "site.key", "site.csr", "site.crt", "x"))
    _openssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca)),
        *("-days", "2", "-subj", f"/CN={ca_name}"),
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={ip}")
    ext.write_text(f"subjectAltName = IP:{ip}\nbasicConstraints = CA:FALSE\n")
    _openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial"),
        *("-out", str(crt), "-days", "2", "-extfile", str(ext)),
    )
    return ca, crt, key


def conf(tmp: Path, http: str, error_level: str = "warn") -> str:
    """An nginx.conf running in the foreground with everything it writes under ``tmp``, around
    ``http``: the inside of the ``http { }`` block (servers, logs, types), written as is."""
    temp = " ".join(f"{k}_temp_path {tmp}/{k};" for k in ("proxy", "fastcgi", "uwsgi", "scgi"))
    return (
        f"user root;\nworker_processes 1;\ndaemon off;\npid {tmp}/nginx.pid;\n"
        f"error_log {tmp}/error.log {error_level};\nevents {{ worker_connections 64; }}\n"
        f"http {{\n    client_body_temp_path {tmp}/body; {temp}\n{http}\n}}\n"
    )


@contextlib.contextmanager
def running(tmp: Path, conf_text: str, ip: str, port: int) -> Iterator[subprocess.Popen]:
    """nginx on ``conf_text`` for the ``with`` block, which starts once ``ip``:``port`` accepts
    connections (within 10 s, or the test fails with nginx's own words); stopped after it."""
    path = tmp / "nginx.conf"
    path.write_text(conf_text)
    assert NGINX is not None
    proc = subprocess.Popen(
        [NGINX, "-p", str(tmp), "-c", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((ip, port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    assert proc.stderr is not None
                    pytest.fail(f"nginx did not start: {proc.stderr.read().decode()[-2000:]}")
                time.sleep(0.1)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
