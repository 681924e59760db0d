"""The generation file and ``CURRENT``: which segments make up the index, read and written here.

An index directory holds::

    CURRENT             the name of the current generation file (one line)
    gen-NNNNNN.json     {"format": "politecrawl-index", "version": 3,
                         "generation", "analyzer", "next_segment",
                         "segments": [{"name", "doc_count", "deleted": [local ids]}]}
    seg-NNNNNN/         immutable segments (see ``segment``)
    LOCK                the writer lock (``fcntl.flock``); readers never take it

A generation lists the live segments and, per segment, its tombstones: local
doc ids that were deleted or replaced after the segment was written.

A commit writes the new generation file (temp file, fsync, rename) and then points
``CURRENT`` at it the same way (``write_generation``, ``publish``), so a reader, which
follows ``CURRENT`` only, sees the old generation or the new one, never a mix.  A reader
notices a new one by ``CURRENT``'s identity (``current_identity``: one ``os.stat``) and
by the commits of its own process (``local_commits``), and checks it still reads the
generation it opened by that file's identity (``file_identity``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from politecrawl.errors import SearchIndexError

__all__ = [
    "GENERATION_RE",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "TMP_GENERATION_RE",
    "current_identity",
    "file_identity",
    "fsync_dir",
    "generation_name",
    "generation_number",
    "is_outdated",
    "live_documents",
    "load_generation",
    "local_commits",
    "note_commit",
    "publish",
    "read_current_pointer",
    "write_atomic",
    "write_generation",
]

INDEX_FORMAT = "politecrawl-index"
INDEX_VERSION = 3  # 2: segments with the anchor field; 3: the analyzer cuts CJK runs into bigrams

#: A generation file's name, and the temp file ``write_atomic`` writes it through first.
GENERATION_RE = re.compile(r"^gen-(\d{6,})\.json$")
TMP_GENERATION_RE = re.compile(r"^\.tmp-gen-(\d{6,})\.json-")


def generation_name(generation: int) -> str:
    """The file name of generation number ``generation``."""
    return f"gen-{generation:06d}.json"


def generation_number(name: str) -> int | None:
    """The number of a generation file's name (``GENERATION_RE``), None for any other name."""
    m = GENERATION_RE.match(name)
    return int(m.group(1)) if m else None


# -- the commits of this process ------------------------------------------------------------

_local_commits = 0


def note_commit() -> None:
    """Called once a commit is published: searchers in this process then look at ``CURRENT``
    on their next query instead of waiting for their check interval."""
    global _local_commits
    _local_commits += 1


def local_commits() -> int:
    """How many commits writers of this process have published (any index)."""
    return _local_commits


# -- reading ---------------------------------------------------------------------------------


def current_identity(index_dir: Path) -> tuple[int, int, int, int] | None:
    """``os.stat`` identity of ``CURRENT`` (inode, size, mtime, ctime), None if absent.

    A commit replaces ``CURRENT`` with a new file (``os.replace``), so the identity changes;
    a freed inode may be reused within one timestamp tick, which is why ``Searcher`` also
    re-reads the file itself at a bounded interval.
    """
    try:
        st = os.stat(Path(index_dir) / "CURRENT")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SearchIndexError(f"cannot stat {index_dir}/CURRENT: {exc}") from exc
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_identity(path: Path) -> tuple[int, int, int]:
    """(inode, mtime, ctime) of a generation file: an index rebuilt from scratch numbers its
    generations from 1 again, so a name alone does not say it is the same file."""
    st = os.stat(path)  # FileNotFoundError: the generation was cleaned up, the caller retries
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def read_current_pointer(index_dir: Path) -> str | None:
    """The current generation file name, or None for an index never committed."""
    try:
        name = (Path(index_dir) / "CURRENT").read_text("utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: UnicodeDecodeError, a damaged pointer
        raise SearchIndexError(f"cannot read {index_dir}/CURRENT: {exc}") from exc
    if name and not _GENERATION_NAME.fullmatch(name):
        raise SearchIndexError(f"{index_dir}/CURRENT names no generation file: {name[:80]!r}")
    return name or None


def is_outdated(index_dir: Path) -> bool:
    """Whether the index was written by an older politecrawl (an older format version)."""
    name = read_current_pointer(index_dir)
    if name is None:
        return False
    try:
        data = json.loads((Path(index_dir) / name).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    version = data.get("version")
    return data.get("format") == INDEX_FORMAT and isinstance(version, int) and version < INDEX_VERSION


def load_generation(index_dir: Path, name: str) -> dict[str, Any]:
    """The generation file ``name``, checked to be of this code's format and version.

    ``FileNotFoundError`` passes through (a writer cleaned it up: the caller retries with the
    newer ``CURRENT``); any other failure is a ``SearchIndexError``."""
    try:
        data = json.loads((Path(index_dir) / name).read_text("utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise SearchIndexError(f"unreadable generation file {index_dir}/{name}: {exc}") from exc
    if not isinstance(data, dict):
        raise SearchIndexError(f"{index_dir}/{name}: not a generation file")
    if data.get("format") != INDEX_FORMAT or data.get("version") != INDEX_VERSION:
        raise SearchIndexError(
            f"{index_dir}/{name}: unsupported index format {data.get('format')!r} v{data.get('version')!r} "
            f"(this code reads {INDEX_FORMAT} v{INDEX_VERSION}): rebuild it with 'politecrawl index --rebuild'"
        )
    if not _well_formed(data):
        raise SearchIndexError(f"{index_dir}/{name}: damaged generation file (its fields are not as written)")
    return data


#: What a generation file and the segments it names are called (``IndexWriter``).
_GENERATION_NAME = re.compile(r"gen-\d{6,}\.json")
_SEGMENT_NAME = re.compile(r"seg-\d{6,}")


def _well_formed(data: dict[str, Any]) -> bool:
    """The fields every reader of a generation takes as written: checked once, here, so damage is
    one ``SearchIndexError`` rather than a KeyError or TypeError wherever a field is used, and a
    segment name can only name a segment of this folder."""
    segments = data.get("segments")
    if not isinstance(data.get("generation"), int) or not isinstance(segments, list):
        return False
    if not isinstance(data.get("analyzer", {}), dict):
        return False
    for entry in segments:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return False
        if not _SEGMENT_NAME.fullmatch(entry["name"]):
            return False
        deleted = entry.get("deleted", [])
        if not isinstance(deleted, list) or not all(isinstance(d, int) and d >= 0 for d in deleted):
            return False
        if not isinstance(entry.get("doc_count", 0), int):
            return False
    return True


def live_documents(index_dir: Path) -> int | None:
    """How many documents the current generation holds, its tombstones left out (what a search
    can find, ``IndexReader.n_docs``), read from the generation file alone; None when there is
    no index (never committed, or no folder). A generation a writer replaced between reading
    ``CURRENT`` and its file is read again from the newer ``CURRENT``."""
    for _ in range(5):
        name = read_current_pointer(index_dir)
        if name is None:
            return None
        try:
            data = load_generation(index_dir, name)
        except FileNotFoundError:
            continue
        return sum(int(seg["doc_count"]) - len(set(seg.get("deleted") or ())) for seg in data["segments"])
    raise SearchIndexError(f"the index in {index_dir} changed under five reads of its CURRENT")


# -- writing ---------------------------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    """fsync a directory, so the entries renamed into it survive a power cut (best effort: a
    file system that cannot fsync a directory is left to its own guarantees)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str) -> None:
    """Replace ``path`` with ``data``: written to a temp file beside it (``.tmp-<name>-<pid>``),
    fsynced, then renamed over it, so a reader sees the old file or the new one."""
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_generation(
    index_dir: Path,
    generation: int,
    *,
    analyzer: dict[str, object],
    next_segment: int,
    segments: list[dict[str, Any]],
) -> str:
    """Write generation file number ``generation`` (not current yet: see ``publish``); its name."""
    name = generation_name(generation)
    data = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "generation": generation,
        "analyzer": analyzer,
        "next_segment": next_segment,
        "segments": segments,
    }
    # Compact JSON: tombstone lists can be long, one line per id is not.
    write_atomic(Path(index_dir) / name, json.dumps(data, separators=(",", ":")))
    return name


def publish(index_dir: Path, name: str) -> None:
    """Point ``CURRENT`` at the generation file ``name``: from the replace on, readers open it."""
    write_atomic(Path(index_dir) / "CURRENT", name + "\n")
