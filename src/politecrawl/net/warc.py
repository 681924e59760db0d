"""WARC archives of what was crawled: ISO 28500 / WARC 1.1.

warcio writes each file's warcinfo record and is what reads and checks the archives; the request
and response records, one pair per fetch, are serialised by :mod:`.warc_records`, byte for byte
as warcio would (:func:`.warc_records.exchange_records` says why: CPU, measured).

One ``WarcWriter`` per worker process (never two writers on one file). Every fetch
that got an answer becomes a ``request`` record and a ``response`` record (a
``revisit`` record, profile *server-not-modified*, for a 304), robots.txt and
sitemaps included. Each record is its own gzip member, with WARC-Block-Digest and
WARC-Payload-Digest; each file starts with a ``warcinfo`` record that the others
point at (WARC-Warcinfo-ID). The payload is stored *decoded*, its HTTP headers rewritten to
match (:mod:`.warc_records`).

Files are named ``PREFIX-TIMESTAMP-SERIAL-PID~HOST.warc.gz`` (the Heritrix
pattern) and rotated once they pass ``max_bytes``. While a file is written it is
called ``….warc.gz.open`` and its writer holds an exclusive ``flock`` on it; a clean
close renames it. Crash safety:

* a request/response pair is compressed in memory and handed to the kernel in one
  ``write``: a SIGKILL (which cannot interrupt Python mid-statement) leaves whole
  records behind, and a torn tail can only come from a write the kernel cut short
  (disk full, power loss);
* when a writer opens, it looks for ``.open`` files nobody holds a lock on (their
  writer died), checks them gzip member by member (CRC and length included), cuts
  a torn last record off, renames them, and logs what it did.
"""

from __future__ import annotations

import errno
import fcntl
import io
import logging
import os
import re
import socket
import stat
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from warcio.warcwriter import WARCWriter

from politecrawl._version import __version__
from politecrawl.errors import PolitecrawlError

from .warc_records import WARC_VERSION, _gzip_member, exchange_records

if TYPE_CHECKING:  # pragma: no cover
    from politecrawl.config import Settings

    from .fetch import FetchResult

__all__ = ["ArchiveError", "RecoveredFile", "WarcWriter", "iter_files", "recover_directory", "scan_members"]

log = logging.getLogger("politecrawl.warc")

OPEN_SUFFIX = ".open"
DEFAULT_PREFIX = "politecrawl"
#: gzip level per record, 0-9. Levels 0-3 are compressed by ISA-L (``isal``) when it is installed:
#: on real HTML its level 1 is ~3x faster than zlib's level 1 and ~10x faster than zlib's 6, for
#: archives ~20 % larger than level 6 (benchmarks/bench_warc.py --micro, docs/archive.md).
GZIP_LEVEL = 1
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


class ArchiveError(PolitecrawlError):
    """The WARC archive cannot be written (folder missing or not writable, disk full)."""


# --------------------------------------------------------------------------- file scanning
@dataclass(frozen=True)
class RecoveredFile:
    """What ``recover_directory`` did with one file left open by a writer that died."""

    path: Path  # the name it has now
    records: int  # whole records kept
    kept_bytes: int
    trimmed_bytes: int  # torn tail cut off (0: the file was whole)
    removed: bool = False  # no whole record at all: the file was deleted


def scan_members(fh, *, chunk: int = 1 << 20) -> tuple[list[int], int, bool]:
    """Walk a file of concatenated gzip members.

    Returns (start offset of every whole member, end of the last whole member, torn): ``torn``
    is True when bytes after that end do not form a whole member (cut off, or garbage).
    Each member is decompressed (bounded memory) so its CRC and length are checked, and it
    must start with a WARC version line.
    """
    starts: list[int] = []
    good_end = 0
    fh.seek(0)
    pending = b""  # bytes read but not yet given to a decompressor
    pos = 0  # file offset of pending[0]
    eof = False
    while True:
        if not pending:
            pending = fh.read(chunk)
            if not pending:
                return starts, good_end, False
        start = pos
        d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        head = b""
        ok = True
        while not d.eof:
            if not pending:
                pending = fh.read(chunk)
                if not pending:
                    eof = True
                    break
            try:
                out = d.decompress(pending, 1 << 16)
                while d.unconsumed_tail and not d.eof:
                    if len(head) < 5:
                        head += out[: 5 - len(head)]
                    out = d.decompress(d.unconsumed_tail, 1 << 16)
            except zlib.error:
                ok = False
                break
            if len(head) < 5:
                head += out[: 5 - len(head)]
            if d.eof:
                used = len(pending) - len(d.unused_data)
                pos += used
                pending = d.unused_data
            else:
                pos += len(pending)
                pending = b""
        if not ok or eof or not d.eof or head != b"WARC/":
            return starts, good_end, True
        starts.append(start)
        good_end = pos


def _lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


def recover_directory(directory: str | os.PathLike[str], prefix: str = DEFAULT_PREFIX) -> list[RecoveredFile]:
    """Finish the ``.open`` files in ``directory`` whose writer is gone (no lock held on them):
    trim a torn last record, rename the file to its final name, log what was done."""
    done: list[RecoveredFile] = []
    for path in Path(directory).glob(f".{prefix}-*.warc.gz.creating"):  # killed while creating a file
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, OSError):  # gone, or a link (O_NOFOLLOW): not ours to remove
            continue
        try:
            if _lock(fd) and os.fstat(fd).st_size == 0:
                os.unlink(path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
    for path in sorted(Path(directory).glob(f"{prefix}-*.warc.gz{OPEN_SUFFIX}")):
        try:
            # Never through a link: recovery truncates, and a link planted under this name would
            # have it cut another file (O_NOFOLLOW fails on one; fstat refuses a FIFO or device).
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:  # another writer finished it meanwhile
            continue
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            log.warning("warc: %s is a symbolic link, not an archive this crawl wrote: left alone", path.name)
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                log.warning("warc: %s is not a regular file: left alone", path.name)
                continue
            if not _lock(fd):
                continue  # a live writer's file
            if not path.exists():  # finished by another writer between open and lock
                continue
            with os.fdopen(os.dup(fd), "rb") as fh:
                starts, good_end, torn = scan_members(fh)
            size = os.fstat(fd).st_size
            final = path.with_name(path.name[: -len(OPEN_SUFFIX)])
            if not starts:
                os.unlink(path)
                log.warning("warc: %s held no whole record (%d bytes): removed", path.name, size)
                done.append(RecoveredFile(final, 0, 0, size, removed=True))
                continue
            if torn or good_end != size:
                os.ftruncate(fd, good_end)
                os.fsync(fd)
                log.warning(
                    "warc: %s: torn last record (%d bytes) cut off after %d whole records",
                    path.name,
                    size - good_end,
                    len(starts),
                )
            else:
                log.warning("warc: %s was left open by a stopped writer; all %d records whole", path.name, len(starts))
            os.rename(path, final)
            done.append(RecoveredFile(final, len(starts), good_end, size - good_end))
        finally:
            os.close(fd)
    return done


def _host_part() -> str:
    return re.sub(r"[^A-Za-z0-9.\-]", "_", socket.gethostname()) or "localhost"


class WarcWriter:
    """Writes one worker process's WARC files. Not thread-safe; one per process (or event loop).

    ``record(result, kind)`` is what ``Fetcher(recorder=...)`` calls after each fetch;
    ``write_exchange(result, kind)`` is the same for callers holding a ``FetchResult``.
    Both return (file name, offset of the response record), or None when nothing was written.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        prefix: str = DEFAULT_PREFIX,
        max_bytes: int = 1_000_000_000,
        info: dict[str, str] | None = None,
        gzip_level: int = GZIP_LEVEL,
        fsync_on_close: bool = True,
    ) -> None:
        if not 0 <= gzip_level <= 9:
            from politecrawl.errors import ConfigError

            raise ConfigError(f"warc_gzip_level must be 0 to 9, got {gzip_level}")
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.gzip_level = gzip_level
        self.fsync_on_close = fsync_on_close
        self.info = {
            "software": f"politecrawl/{__version__} (warcio)",
            "format": "WARC File Format 1.1",
            "conformsTo": CONFORMS_TO,
            "hostname": socket.gethostname(),
            "robots": "obey",
            **(info or {}),
        }
        self._serial = 0
        self._fd: int | None = None
        self._path: Path | None = None  # the .open name
        self._size = 0
        self._records_in_file = 0
        self._warcinfo_id: str | None = None
        self._buf = io.BytesIO()
        self._builder = WARCWriter(self._buf, gzip=False, warc_version=WARC_VERSION)
        self.files: list[Path] = []  # final names of every file this writer started
        self.records = 0
        self.bytes_written = 0
        self.cpu_seconds = 0.0  # CPU this thread spent archiving (what the archive costs the crawl)
        self.recovered: list[RecoveredFile] = []
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.recovered = recover_directory(self.directory, prefix)
        except OSError as exc:
            raise ArchiveError(f"cannot use WARC folder {self.directory}: {exc.strerror or exc}") from exc

    @classmethod
    def from_settings(cls, settings: "Settings") -> "WarcWriter | None":
        """The writer ``settings.warc_dir`` asks for (None: no archive)."""
        if not settings.warc_dir:
            return None
        from politecrawl.config import user_agent_string

        return cls(
            settings.warc_dir,
            max_bytes=settings.warc_max_bytes,
            gzip_level=settings.warc_gzip_level,
            info={
                "http-header-user-agent": user_agent_string(settings),
                "operator": settings.contact or "",
                "isPartOf": os.path.basename(settings.db) if "://" not in settings.db else "politecrawl",
            },
        )

    # -- files -------------------------------------------------------------------
    @property
    def current_file(self) -> str | None:
        return None if self._path is None else self._path.name[: -len(OPEN_SUFFIX)]

    def _new_name(self) -> Path:
        now = datetime.now(timezone.utc)
        stamp = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
        return self.directory / f"{self.prefix}-{stamp}-{self._serial:05d}-{os.getpid()}~{_host_part()}.warc.gz"

    def _open_file(self) -> None:
        while True:
            final = self._new_name()
            self._serial += 1
            path = final.with_name(final.name + OPEN_SUFFIX)
            if final.exists() or path.exists():
                continue
            # Created under a name recover_directory does not look at, locked, then given its
            # .open name: no other process can take a new file for a dead writer's.
            creating = final.with_name("." + final.name + ".creating")
            try:
                fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                continue
            except OSError as exc:
                raise ArchiveError(f"cannot create WARC file {path}: {exc.strerror or exc}") from exc
            fcntl.flock(fd, fcntl.LOCK_EX)  # ours: recover_directory in other processes leaves it alone
            try:
                os.link(creating, path)  # fails if the name was taken meanwhile (unlike rename)
            except FileExistsError:
                os.unlink(creating)
                os.close(fd)
                continue
            except FileNotFoundError:  # taken for a dead writer's leftover before we locked it
                os.close(fd)
                continue
            except OSError as exc:
                os.close(fd)
                raise ArchiveError(f"cannot create WARC file {path}: {exc.strerror or exc}") from exc
            os.unlink(creating)
            break
        self._fd, self._path, self._size, self._records_in_file = fd, path, 0, 0
        self.files.append(final)
        record = self._builder.create_warcinfo_record(final.name, self.info)
        self._warcinfo_id = record.rec_headers.get_header("WARC-Record-ID")
        self._write_bytes(self._serialize(record))
        log.info("warc: writing %s", final.name)

    def _close_file(self) -> None:
        if self._fd is None:
            return
        fd, path = self._fd, self._path
        assert path is not None
        self._fd = self._path = None
        try:
            if self.fsync_on_close:
                os.fsync(fd)
            os.rename(path, path.with_name(path.name[: -len(OPEN_SUFFIX)]))
        finally:
            os.close(fd)  # releases the lock

    def close(self) -> None:
        """Finish the current file (fsync, rename to its final name). The writer can go on after."""
        if self._fd is not None:
            log.info(
                "warc: %d records, %.1f MB in %d files, %.2f s CPU",
                self.records,
                self.bytes_written / 1e6,
                len(self.files),
                self.cpu_seconds,
            )
        self._close_file()

    def __enter__(self) -> "WarcWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- records -----------------------------------------------------------------
    def _serialize(self, record) -> bytes:
        """A record built by warcio (the warcinfo record, one a file) as one gzip member."""
        buf = self._buf
        buf.seek(0)
        buf.truncate()
        self._builder.write_record(record)
        return _gzip_member(buf.getvalue(), self.gzip_level)

    def _write_bytes(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            raise ArchiveError(f"cannot write WARC file {self._path}: {exc.strerror or exc}") from exc
        self._size += len(data)

    def _build(self, result: "FetchResult", kind: str | None) -> tuple[bytes, bytes]:
        """The request record and the response (or revisit) record, each one gzip member (see
        :func:`exchange_records`)."""
        return exchange_records(result, kind, self._warcinfo_id, self.gzip_level)

    def write_exchange(self, result: "FetchResult", kind: str | None = None) -> tuple[str, int] | None:
        """Archive one fetch: request + response (or revisit for a 304), written in one write.

        Returns (file name, offset of the response record). A fetch without an answer
        (``status`` None) has nothing to archive: None."""
        if result.status is None:
            return None
        t0 = time.thread_time()
        if kind is None and result.request_target == "/robots.txt":
            kind = "robots"
        # Rotation is decided before the records are built (they name their file's warcinfo), on
        # an upper bound of their size: a file ends at most one exchange short of max_bytes.
        bound = len(result.body) + 2 * (
            512
            + sum(len(k) + len(v) + 4 for k, v in result.raw_headers)
            + sum(len(k) + len(v) + 4 for k, v in result.request_headers)
            + 2 * len(result.url)
        )
        if self._fd is not None and self._records_in_file and self._size + bound > self.max_bytes:
            self._close_file()
        if self._fd is None:
            self._open_file()
        request, response = self._build(result, kind)
        offset = self._size + len(request)
        self._write_bytes(request + response)
        self._records_in_file += 2
        self.records += 2
        self.bytes_written += len(request) + len(response)
        self.cpu_seconds += time.thread_time() - t0
        name = self.current_file
        assert name is not None
        return name, offset

    record = write_exchange  # what Fetcher(recorder=...) calls


def iter_files(directory: str | os.PathLike[str], prefix: str = DEFAULT_PREFIX) -> Iterator[Path]:
    """The finished WARC files in ``directory``, oldest name first."""
    yield from sorted(Path(directory).glob(f"{prefix}-*.warc.gz"))
