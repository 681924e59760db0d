"""A damaged index is one ``SearchIndexError``, never another exception: 300 seeded mutations
(bit flips, truncations, zeroed runs) of one file each of a small index, each opened and searched.

An outside audit found 10 of 300 such mutations raising ``tokenize.TokenError`` (numpy parses an
``.npy`` header as Python), ``UnicodeDecodeError`` (``CURRENT``, ``titles.bin``) or ``KeyError`` (a
generation file's fields) instead: the web server answered 500 and the CLI printed a traceback.
The control: the undamaged index answers the same searches with hits, and many of the mutations
are seen (they raise the index error), so the searches do read the damaged files.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from politecrawl.errors import SearchIndexError
from politecrawl.index import IndexWriter, Searcher

MUTATIONS = 300


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "index"
    with IndexWriter(path) as writer:
        for i in range(300):
            writer.add_document(
                f"https://h{i % 7}.example/p{i}", f"Title {i} ünïcode", f"alpha beta gamma word{i} text " * 5
            )
    return path


def _searches(index: Path) -> int:
    searcher = Searcher(index)
    hits = searcher.search('alpha word5 "beta gamma"', limit=10)
    hits += searcher.search("title", limit=10)
    searcher.count("text")
    searcher.stats()
    return len(hits)


def _mutate(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    how = rng.choice(["flip", "truncate", "zero"])
    if not data:
        return how
    if how == "flip":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[: rng.randrange(len(data))]
    else:
        at = rng.randrange(len(data))
        data[at : at + 16] = bytes(len(data[at : at + 16]))
    path.write_bytes(bytes(data))
    return how


def test_every_damaged_index_is_one_search_index_error(index, tmp_path):
    assert _searches(index) == 20  # the control: undamaged, the searches find pages
    rng = random.Random(20261207)
    seen = 0
    other: list[str] = []
    for trial in range(MUTATIONS):
        copy = tmp_path / f"m{trial}"
        shutil.copytree(index, copy)
        victim = rng.choice(sorted(p for p in copy.rglob("*") if p.is_file()))
        how = _mutate(victim, rng)
        try:
            _searches(copy)
        except SearchIndexError:
            seen += 1
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            other.append(f"{victim.name} ({how}): {type(exc).__name__}: {exc}"[:300])
        shutil.rmtree(copy)
    assert other == []
    assert seen >= MUTATIONS // 4, seen  # most damage is seen, not read past
