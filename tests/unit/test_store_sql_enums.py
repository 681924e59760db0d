"""The store's SQL and its enums agree: every URL state, URL kind, wait reason and duplicate kind
written in a statement or in the schema is a member of its enum, and the schema's description of
the URL states and duplicate kinds names every member.

The statements take the enums' values from ``store.common`` (formatted in once, at import), so a
renamed member changes the SQL with it; these checks catch a literal written by hand again.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

import politecrawl.store
from politecrawl.policy.politeness import WaitReason
from politecrawl.policy.response import URLState
from politecrawl.store import common
from politecrawl.store.api import DuplicateKind, URLKind

STORE_DIR = Path(politecrawl.store.__file__).parent
SCHEMAS = sorted(p.name for p in resources.files("politecrawl.store").joinpath("schema").iterdir())

#: Column -> the enum its values come from.
ENUM_OF = {"state": URLState, "kind": URLKind, "wait_reason": WaitReason, "duplicate_kind": DuplicateKind}
_COLUMNS = "|".join(ENUM_OF)
#: ``col = 'x'``, ``col <> 'x'``, ``col IN ('x', 'y')``, ``col ... DEFAULT 'x'`` (a table's column).
_COMPARED = re.compile(rf"\b({_COLUMNS})\s*(?:=|<>|!=|(?:NOT\s+)?IN)\s*\(?((?:'[^']*'\s*,?\s*)+)\)?", re.I)
_DEFAULT = re.compile(rf"^\s*({_COLUMNS})\s+\w+\s+NOT NULL DEFAULT\s+'([^']*)'", re.I | re.M)


def literals(sql: str) -> list[tuple[str, str]]:
    """(column, value) for every enum column compared with, or defaulting to, a string literal."""
    found = [(col.lower(), value) for col, value in _DEFAULT.findall(sql)]
    for col, values in _COMPARED.findall(sql):
        found += [(col.lower(), v) for v in re.findall(r"'([^']*)'", values)]
    return found


def _without_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def test_the_pattern_finds_literals():
    # Negative control: a hand-written literal is seen, whatever its form.
    sql = "UPDATE frontier SET state = 'queued' WHERE state IN ('done', 'gone') AND kind <> 'robots'"
    assert literals(sql) == [("state", "queued"), ("state", "done"), ("state", "gone"), ("kind", "robots")]
    assert literals("  state            text NOT NULL DEFAULT 'queued',") == [("state", "queued")]


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_literals_are_enum_members(name):
    sql = _without_comments(resources.files("politecrawl.store").joinpath(f"schema/{name}").read_text())
    for col, value in literals(sql):
        assert value in {m.value for m in ENUM_OF[col]}, f"{name}: {col} = {value!r} is not a {ENUM_OF[col].__name__}"


@pytest.mark.parametrize("path", sorted(STORE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_statement_writes_an_enum_value_by_hand(path):
    """The Python modules' SQL compares with the enums' values through ``store.common``."""
    assert literals(path.read_text(encoding="utf-8")) == [], f"{path.name}: write these from the enum"


def test_the_sql_literals_are_the_enums_values():
    assert common.QUEUED == "'queued'" and common.sql_literal(URLState.QUEUED) == f"'{URLState.QUEUED.value}'"
    for name, member in {
        "QUEUED": URLState.QUEUED,
        "LEASED": URLState.LEASED,
        "DONE": URLState.DONE,
        "ROBOTS_KIND": URLKind.ROBOTS,
        "WAIT_CRAWL_DELAY": WaitReason.CRAWL_DELAY,
        "WAIT_LOW_YIELD": WaitReason.LOW_YIELD,
        "WAIT_PARKED": WaitReason.PARKED,
        "WAIT_ROBOTS_REDIRECT": WaitReason.ROBOTS_REDIRECT,
        "WAIT_ROBOTS_UNREACHABLE": WaitReason.ROBOTS_UNREACHABLE,
        "EXACT": DuplicateKind.EXACT,
        "NEAR": DuplicateKind.NEAR,
    }.items():
        assert getattr(common, name) == f"'{member.value}'", name
    assert common.PENDING_STATES == f"('{URLState.QUEUED.value}', '{URLState.LEASED.value}')"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_schema_describes_every_url_state_and_duplicate_kind(backend):
    """The reverse: the first schema's column comments name exactly the enums' members."""
    sql = resources.files("politecrawl.store").joinpath(f"schema/{backend}_001.sql").read_text()

    def described(column: str) -> set[str]:
        line = next(line for line in sql.splitlines() if re.match(rf"\s*{column}\s", line))
        return {v.strip() for v in line.split("--", 1)[1].split("|")}

    assert described("state") == {m.value for m in URLState}
    assert described("duplicate_kind") == {m.value for m in DuplicateKind}
