"""The settings stored with a crawl, read back over the settings of a later command."""

from __future__ import annotations

import json

from politecrawl.config import DEFAULTS, apply_stored_settings


def test_stored_settings_read_back_as_the_crawl_had_them():
    crawl = DEFAULTS.replace(min_delay=3.0, include=("/docs/",), hosts=(("slow.example", 9.0, None),), scope="domain")
    names = ("min_delay", "include", "hosts", "scope")
    stored = json.dumps({k: getattr(crawl, k) for k in names})  # tuples are lists in the JSON
    back = apply_stored_settings(DEFAULTS, stored)
    assert {k: getattr(back, k) for k in names} == {k: getattr(crawl, k) for k in names}
    assert back.hosts == (("slow.example", 9.0, None),) and isinstance(back.include, tuple)


def test_only_the_names_asked_for_and_only_known_names_apply():
    stored = json.dumps({"min_delay": 3.0, "scope": "any", "a_setting_of_another_version": 1})
    assert apply_stored_settings(DEFAULTS, stored, names=["scope"]) == DEFAULTS.replace(scope="any")
    assert apply_stored_settings(DEFAULTS, stored) == DEFAULTS.replace(min_delay=3.0, scope="any")


def test_nothing_stored_leaves_the_settings_as_they_are():
    assert apply_stored_settings(DEFAULTS, None) is DEFAULTS
    assert apply_stored_settings(DEFAULTS, "") is DEFAULTS
    assert apply_stored_settings(DEFAULTS, "{}") is DEFAULTS
