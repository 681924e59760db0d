"""The WARC writer: records read back with warcio, digests verified, rotation, torn-record recovery."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import io
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker

from politecrawl.net.fetch import Fetcher, FetchResult
from politecrawl.net.warc import OPEN_SUFFIX, WarcWriter, iter_files, recover_directory, scan_members


def result(
    path: str = "/a",
    body: bytes = b"<html><title>A</title>hello</html>",
    status: int = 200,
    *,
    raw_headers=None,
    truncated: bool = False,
    reason: str = "OK",
) -> FetchResult:
    now = time.time()
    return FetchResult(
        url=f"http://127.0.0.2:8000{path}",
        status=status,
        started_at=now,
        ended_at=now + 0.01,
        body=body,
        truncated=truncated,
        http_version="1.1",
        reason=reason,
        raw_headers=tuple(
            raw_headers
            if raw_headers is not None
            else [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]
        ),
        request_target=path,
        request_headers=(("Host", "127.0.0.2:8000"), ("User-Agent", "politecrawl/0.1.0")),
        ip="127.0.0.2",
    )


def records(path: Path) -> list:
    """(type, uri, headers, http headers, content) of every record, digests checked (raise on mismatch)."""
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests="raise"):
            content = rec.content_stream().read()
            out.append(
                (
                    rec.rec_type,
                    rec.rec_headers.get_header("WARC-Target-URI"),
                    rec.rec_headers,
                    rec.http_headers,
                    content,
                )
            )
    return out


def warcio_check(*paths: Path) -> int:
    return Checker(type("Cmd", (), {"inputs": [str(p) for p in paths], "verbose": False})()).process_all()


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_every_record_reads_back_with_verified_digests(tmp_path):
    w = WarcWriter(tmp_path)
    gz_body = b"<html>" + b"compressible " * 200 + b"</html>"
    fetches = [
        (result("/robots.txt", b"User-agent: *\nAllow: /\n"), None),
        (result("/a"), "page"),
        (
            result(
                "/gz",
                gz_body,
                raw_headers=[
                    ("Content-Type", "text/html"),
                    ("Content-Encoding", "gzip"),
                    ("Content-Length", str(len(gzip.compress(gz_body)))),
                ],
            ),
            "page",
        ),
        (result("/chunked", b"abc", raw_headers=[("Transfer-Encoding", "chunked")]), "page"),
        (result("/cut", b"x" * 100, truncated=True), "page"),
        (result("/a", b"", status=304, reason="Not Modified", raw_headers=[("ETag", '"v1"')]), "page"),
        (result("/sitemap.xml", b"<urlset/>", raw_headers=[("Content-Type", "application/xml")]), "sitemap"),
    ]
    places = [w.write_exchange(r, kind) for r, kind in fetches]
    w.close()
    files = list(iter_files(tmp_path))
    assert len(files) == 1 and not list(tmp_path.glob("*" + OPEN_SUFFIX))
    recs = records(files[0])
    assert [r[0] for r in recs] == ["warcinfo"] + ["request", "response"] * 5 + [
        "request",
        "revisit",
        "request",
        "response",
    ]
    assert warcio_check(files[0]) == 0
    info_id = recs[0][2].get_header("WARC-Record-ID")
    responses = [r for r in recs if r[0] in ("response", "revisit")]
    for (rtype, uri, headers, http, content), (fetch, _kind) in zip(responses, fetches):
        assert uri == fetch.url
        assert headers.get_header("WARC-Warcinfo-ID") == info_id
        assert headers.protocol == "WARC/1.1"
        assert headers.get_header("WARC-IP-Address") == "127.0.0.2"
        if rtype == "response":
            assert content == fetch.body  # the decoded body, exactly
            assert headers.get_header("WARC-Payload-Digest") == sha1_b32(fetch.body)
            assert http.get_header("Content-Length") == str(len(fetch.body))
    # robots.txt is labelled by its path, the others by what the caller said
    assert responses[0][2].get_header("Politecrawl-Kind") == "robots"
    assert responses[6][2].get_header("Politecrawl-Kind") == "sitemap"
    # the decoded body: the recorded headers describe it; the originals are kept under X-Archive-Orig-
    gz = responses[2][3]
    assert gz.get_header("Content-Encoding") is None
    assert gz.get_header("X-Archive-Orig-Content-Encoding") == "gzip"
    assert gz.get_header("X-Archive-Orig-Content-Length") == str(len(gzip.compress(gz_body)))
    chunked = responses[3][3]
    assert chunked.get_header("Transfer-Encoding") is None
    assert chunked.get_header("X-Archive-Orig-Transfer-Encoding") == "chunked"
    assert responses[4][2].get_header("WARC-Truncated") == "length"
    revisit = responses[5][2]
    assert revisit.get_header("WARC-Profile").endswith("/revisit/server-not-modified")
    assert revisit.get_header("WARC-Refers-To-Target-URI") == fetches[5][0].url
    # requests: linked to their response, with the headers that were sent
    requests = [r for r in recs if r[0] == "request"]
    for req, resp in zip(requests, responses):
        assert req[2].get_header("WARC-Concurrent-To") == resp[2].get_header("WARC-Record-ID")
        assert req[3].get_header("User-Agent") == "politecrawl/0.1.0"
    assert requests[1][3].protocol == "GET" and requests[1][3].statusline == "/a HTTP/1.1"
    # the returned offsets point at the response records
    for (name, offset), (fetch, _) in zip(places, fetches):
        assert name == files[0].name
        with open(files[0], "rb") as fh:
            fh.seek(offset)
            rec = next(iter(ArchiveIterator(fh)))
            assert rec.rec_type in ("response", "revisit")
            assert rec.rec_headers.get_header("WARC-Target-URI") == fetch.url


def _warcio_exchange(w: WarcWriter, fetch: FetchResult, kind: str | None) -> bytes:
    """The oracle: the same exchange built and serialised by warcio itself (``create_warc_record``
    with the writer's WARC fields, ``write_record``), uncompressed: request record, then response."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from politecrawl.net import warc_records

    buf = io.BytesIO()
    b = WARCWriter(buf, gzip=False, warc_version="WARC/1.1")
    url = fetch.url
    common = [("WARC-Date", warc_records._warc_date(fetch.started_at)), ("WARC-Warcinfo-ID", w._warcinfo_id)]
    if fetch.ip:
        common.append(("WARC-IP-Address", fetch.ip))
    resp_id = b._make_warc_id()
    http = StatusAndHeaders(
        f"{fetch.status} {fetch.reason or ''}".rstrip(),
        warc_records._recorded_headers(fetch),
        protocol=f"HTTP/{fetch.http_version}",
    )
    fields = [("WARC-Record-ID", resp_id), *common]
    if kind:
        fields.append(("Politecrawl-Kind", kind))
    if fetch.status == 304:
        fields += [("WARC-Profile", warc_records.REVISIT_NOT_MODIFIED), ("WARC-Refers-To-Target-URI", url)]
        response = b.create_warc_record(
            url, "revisit", payload=io.BytesIO(b""), length=0, http_headers=http, warc_headers_dict=dict(fields)
        )
    else:
        if fetch.truncated:
            fields.append(("WARC-Truncated", "length"))
        response = b.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(fetch.body),
            length=len(fetch.body),
            http_headers=http,
            warc_headers_dict=dict(fields),
        )
    req_http = StatusAndHeaders(
        f"GET {fetch.request_target} HTTP/{fetch.http_version}", list(fetch.request_headers), is_http_request=True
    )
    request = b.create_warc_record(
        url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=req_http,
        warc_headers_dict=dict([("WARC-Record-ID", b._make_warc_id()), *common, ("WARC-Concurrent-To", resp_id)]),
    )
    b.write_record(request)
    b.write_record(response)
    return buf.getvalue()


def _fields(raw: bytes) -> list:
    """Records as (WARC fields as a set, block): warcio orders some fields its own way (the dict
    path puts WARC-Type after them, Content-Type before the digests); the set of fields, their
    values and every byte of the blocks must match."""
    out = []
    for part in raw.split(b"WARC/1.1\r\n")[1:]:
        head, _, block = part.partition(b"\r\n\r\n")
        out.append((frozenset(head.split(b"\r\n")), block))
    return out


@pytest.mark.parametrize("level", [1, 6])
def test_records_are_what_warcio_writes_for_the_same_exchange(tmp_path, monkeypatch, level):
    """The writer serialises request and response records itself (a third of warcio's CPU): each is
    field for field and byte for byte (HTTP headers, body, digests, lengths) what warcio writes."""
    ids = iter(range(1, 10_000))
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(ids)))
    body = "<html>été ".encode() + os.urandom(2_000) + b"</html>"
    fetches = [
        (result("/robots.txt", b"User-agent: *\nAllow: /\n"), None),
        (result("/a", body), "page"),
        (
            result(
                "/gz",
                b"abc" * 500,
                raw_headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip"), ("Content-Length", "99")],
            ),
            "page",
        ),
        (result("/cut", b"x" * 100, truncated=True), "page"),
        (result("/a", b"", status=304, reason="Not Modified", raw_headers=[("ETag", '"v1"')]), "page"),
        (result("/n", b"", status=204, reason="No Content", raw_headers=[]), None),
        (result("/no-reason", b"y", reason=""), "sitemap"),
        # not ASCII: warcio percent-encodes such headers (RFC 8187); the writer hands them to warcio
        (
            result(
                "/u", b"x", raw_headers=[("Content-Disposition", 'attachment; filename="café.txt"'), ("X-Note", "été")]
            ),
            "page",
        ),
        (result("/q?a=1&b=%C3%A9", b"z"), "page"),
    ]
    fetches[-1][0].ip = None
    fetches[2][0].http_version = "1.0"
    w = WarcWriter(tmp_path, gzip_level=level)
    mine = []
    for fetch, kind in fetches:
        if w._fd is None:
            w._open_file()
        n = next(ids)  # the oracle gets the same two record ids
        monkeypatch.setattr(uuid, "uuid4", lambda n=n: uuid.UUID(int=n))
        request, response = w._build(fetch, kind)
        mine.append(gzip.decompress(request) + gzip.decompress(response))
        monkeypatch.setattr(uuid, "uuid4", lambda n=n: uuid.UUID(int=n))
        theirs = _warcio_exchange(w, fetch, kind)
        assert _fields(mine[-1]) == _fields(theirs), fetch.url
        assert len(mine[-1]) == len(theirs)
    w.close()
    # and read back by warcio with every digest checked
    for fetch, kind in fetches:
        w.write_exchange(fetch, kind)
    w.close()
    for f in iter_files(tmp_path):
        assert warcio_check(f) == 0
        records(f)


def test_digests_are_sha1_in_base32():
    from politecrawl.net.warc_records import _sha1

    for n in (0, 1, 19, 20, 21, 1_000):
        data = os.urandom(n)
        assert _sha1(data) == sha1_b32(data)
        assert _sha1(data[:7], data[7:]) == sha1_b32(data)


def test_a_fetch_without_an_answer_writes_nothing(tmp_path):
    w = WarcWriter(tmp_path)
    r = result()
    r.status, r.error = None, "timeout"
    assert w.write_exchange(r) is None
    w.close()
    assert list(tmp_path.iterdir()) == []  # no file is started for nothing


def test_files_rotate_at_the_size_limit_each_with_its_warcinfo(tmp_path):
    w = WarcWriter(tmp_path, max_bytes=20_000)
    body = os.urandom(3_000)  # incompressible: the size is predictable
    names = [w.write_exchange(result(f"/p{i}", body))[0] for i in range(30)]
    w.close()
    files = list(iter_files(tmp_path))
    assert len(files) >= 4 and len(set(names)) == len(files)
    assert [f.name for f in files] == sorted(set(names))  # names sort in writing order
    total = 0
    for f in files:
        assert f.stat().st_size <= 20_000
        recs = records(f)
        assert recs[0][0] == "warcinfo" and recs[0][2].get_header("WARC-Filename") == f.name
        info_id = recs[0][2].get_header("WARC-Record-ID")
        assert all(r[2].get_header("WARC-Warcinfo-ID") == info_id for r in recs[1:])
        total += sum(1 for r in recs if r[0] == "response")
    assert total == 30
    # PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz
    prefix, stamp, serial, rest = files[0].name.split("-", 3)
    assert prefix == "politecrawl" and len(stamp) == 17 and stamp.isdigit() and serial == "00000"
    assert rest.startswith(f"{os.getpid()}~") and rest.endswith(".warc.gz")


def _die(w: WarcWriter) -> Path:
    """What a SIGKILL leaves: the .open file, its lock gone, never renamed."""
    path = w._path
    os.close(w._fd)
    w._fd = w._path = None
    return path


def test_a_torn_last_record_is_trimmed_when_a_writer_opens(tmp_path, caplog):
    w = WarcWriter(tmp_path)
    for i in range(5):
        w.write_exchange(result(f"/p{i}", b"page %d " % i * 50))
    path = _die(w)
    whole = path.stat().st_size
    with open(path, "rb") as fh:
        starts, end, torn = scan_members(fh)
    assert end == whole and not torn and len(starts) == 11
    with open(path, "r+b") as fh:
        fh.truncate(starts[-1] + (whole - starts[-1]) // 2)  # cut the last response in half
    caplog.set_level("WARNING", logger="politecrawl.warc")
    w2 = WarcWriter(tmp_path)
    assert len(w2.recovered) == 1
    fixed = w2.recovered[0]
    assert fixed.records == 10 and fixed.kept_bytes == starts[-1] and fixed.trimmed_bytes > 0
    assert "torn last record" in caplog.text
    assert not path.exists() and fixed.path.exists()
    recs = records(fixed.path)  # whole records only: the request whose response was torn stays
    assert [r[0] for r in recs][-2:] == ["response", "request"]
    assert warcio_check(fixed.path) == 0
    # the new writer writes a new file, and both are readable
    w2.write_exchange(result("/after"))
    w2.close()
    assert len(list(iter_files(tmp_path))) == 2
    assert warcio_check(*iter_files(tmp_path)) == 0


def test_garbage_after_the_last_record_is_trimmed_and_empty_files_removed(tmp_path):
    w = WarcWriter(tmp_path)
    w.write_exchange(result())
    path = _die(w)
    size = path.stat().st_size
    with open(path, "ab") as fh:
        fh.write(b"\x1f\x8b\x08\x00 not really gzip")
    empty = tmp_path / ("politecrawl-20260101000000000-00000-1~x.warc.gz" + OPEN_SUFFIX)
    empty.write_bytes(b"\x1f\x8b")
    done = {r.path.name: r for r in recover_directory(tmp_path)}
    assert done[path.name[: -len(OPEN_SUFFIX)]].kept_bytes == size
    assert done[empty.name[: -len(OPEN_SUFFIX)]].removed and not empty.exists()
    assert warcio_check(*iter_files(tmp_path)) == 0


def test_a_live_writers_file_is_left_alone(tmp_path):
    live = WarcWriter(tmp_path)
    live.write_exchange(result())
    other = WarcWriter(tmp_path)  # its recovery finds the .open file locked
    assert other.recovered == []
    assert live._path.exists()
    live.write_exchange(result("/b"))
    live.close()
    assert warcio_check(*iter_files(tmp_path)) == 0


WRITER_SCRIPT = """
import os, sys, time
from politecrawl.net.fetch import FetchResult
from politecrawl.net.warc import WarcWriter
w = WarcWriter(sys.argv[1], max_bytes=300_000)
body = os.urandom(16_384)  # incompressible: a file rotates every ~18 exchanges
i = 0
while True:
    now = time.time()
    w.write_exchange(FetchResult(url=f"http://127.0.0.2/p{i}", status=200, started_at=now, ended_at=now,
                                 body=body, http_version="1.1", reason="OK", request_target=f"/p{i}",
                                 raw_headers=(("Content-Type", "application/octet-stream"),)))
    i += 1
    if i == 20:
        print("writing", flush=True)
"""


def test_sigkill_leaves_whole_records_only(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"writing"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    left_open = list(tmp_path.glob("*" + OPEN_SUFFIX))
    # the file in progress (none if the kill fell between two files); the rotated ones were closed
    assert len(left_open) <= 1
    recovered = recover_directory(tmp_path)
    assert len(recovered) == len(left_open)  # (a file killed before its warcinfo is removed)
    assert not list(tmp_path.glob("*" + OPEN_SUFFIX)) and not list(tmp_path.glob(".*"))
    files = list(iter_files(tmp_path))
    assert len(files) >= 2
    assert warcio_check(*files) == 0
    n = sum(1 for f in files for r in records(f) if r[0] == "response")
    assert n >= 20


def test_the_fetcher_hands_every_answer_to_the_recorder(tmp_path):
    """A real HTTP exchange (aiohttp both ends, gzip on the wire): what the archive says was sent."""
    page = b"<html><title>T</title>" + b"words " * 500 + b"</html>"

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/304":
            return web.Response(status=304, headers={"ETag": '"e"'})
        resp = web.Response(body=page, content_type="text/html", headers={"X-Extra": "kept"})
        resp.enable_compression()
        return resp

    async def run():
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        w = WarcWriter(tmp_path)
        try:
            async with Fetcher(
                user_agent="politecrawl/test",
                max_bytes=1 << 20,
                connect_timeout=5,
                read_timeout=5,
                total_timeout=10,
                recorder=w,
            ) as f:
                ok = await f.get(f"http://127.0.0.1:{port}/page?q=1", kind="page")
                nm = await f.get(f"http://127.0.0.1:{port}/304", etag='"e"')
                dead = await f.get("http://127.0.0.1:9/nothing-listens-here")
        finally:
            w.close()
            await runner.cleanup()
        return port, ok, nm, dead

    port, ok, nm, dead = asyncio.run(run())
    assert ok.status == 200 and ok.body == page and ok.warc is not None
    assert nm.status == 304 and nm.warc is not None
    assert dead.status is None and dead.warc is None
    (f,) = iter_files(tmp_path)
    recs = records(f)
    assert [r[0] for r in recs] == ["warcinfo", "request", "response", "request", "revisit"]
    _, uri, headers, http, content = recs[2]
    assert uri == f"http://127.0.0.1:{port}/page?q=1" and content == page
    assert http.get_statuscode() == "200" and http.get_header("X-Extra") == "kept"
    assert http.get_header("X-Archive-Orig-Content-Encoding") in ("gzip", "deflate")  # aiohttp's choice
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("Content-Length") == str(len(page))
    assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
    req = recs[1][3]
    assert req.statusline == "/page?q=1 HTTP/1.1"
    assert req.get_header("Host") == f"127.0.0.1:{port}" and req.get_header("User-Agent") == "politecrawl/test"
    assert "gzip" in req.get_header("Accept-Encoding")
    assert recs[3][3].get_header("If-None-Match") == '"e"'
    assert warcio_check(f) == 0


def test_zlib_does_it_without_isal_and_at_high_levels(tmp_path, monkeypatch):
    from politecrawl.net import warc_records

    for level, isal in ((1, None), (6, warc_records._isal_zlib), (9, None)):
        monkeypatch.setattr(warc_records, "_isal_zlib", isal)
        folder = tmp_path / f"l{level}"
        w = WarcWriter(folder, gzip_level=level)
        w.write_exchange(result("/x", b"<html>" + b"text " * 1000 + b"</html>"))
        w.close()
        (f,) = iter_files(folder)
        assert [r[0] for r in records(f)] == ["warcinfo", "request", "response"]
        assert warcio_check(f) == 0


def test_settings_choose_the_folder_limits_and_identity(tmp_path):
    from politecrawl.config import load_settings
    from politecrawl.errors import ConfigError

    assert WarcWriter.from_settings(load_settings({}, env={})) is None
    s = load_settings(
        {
            "warc_dir": str(tmp_path),
            "warc_max_bytes": 12345,
            "warc_gzip_level": 3,
            "contact": "https://ops.example/bot",
        },
        env={},
    )
    w = WarcWriter.from_settings(s)
    assert (w.max_bytes, w.gzip_level) == (12345, 3)
    w.write_exchange(result())
    w.close()
    (f,) = iter_files(tmp_path)
    info = records(f)[0][4].decode()
    assert "http-header-user-agent: politecrawl/" in info and "+https://ops.example/bot" in info
    assert "operator: https://ops.example/bot" in info and "format: WARC File Format 1.1" in info
    with pytest.raises(ConfigError):
        WarcWriter(tmp_path, gzip_level=10)


def test_recovery_never_truncates_through_a_planted_link(tmp_path, caplog):
    """Recovery cuts a torn file short: a link planted under an open file's name must not make it
    cut the file the link points to. The control: the same torn file, really there, is cut."""
    w = WarcWriter(tmp_path / "a")
    w.write_exchange(result())
    torn = _die(w)
    with open(torn, "ab") as fh:
        fh.write(b"\x1f\x8b\x08\x00 torn")
    victim = tmp_path / "victim.warc.gz"
    victim.write_bytes(torn.read_bytes())
    planted_dir = tmp_path / "b"
    planted_dir.mkdir()
    link = planted_dir / torn.name
    link.symlink_to(victim)
    before = victim.read_bytes()
    assert recover_directory(planted_dir) == []
    assert victim.read_bytes() == before and link.is_symlink()
    assert "symbolic link" in caplog.text
    # The control: the real torn file is cut (so the link's target would have been).
    (fixed,) = recover_directory(tmp_path / "a")
    assert fixed.trimmed_bytes > 0 and fixed.path.stat().st_size < len(before)
