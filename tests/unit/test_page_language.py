"""The language the indexer gives a page (``crawl/language.py``): the declared one, else CLD2's."""

from __future__ import annotations

import pytest

from politecrawl.crawl.language import MIN_CHARS, detect, page_language

GERMAN = "Der schnelle braune Fuchs springt über den faulen Hund, und die Katze schläft im Garten. " * 4
ENGLISH = "The quick brown fox jumps over the lazy dog, and the cat sleeps in the garden all day. " * 4
FRENCH = "Le renard brun rapide saute par-dessus le chien paresseux, et le chat dort au jardin. " * 4


@pytest.mark.parametrize("text, lang", [(GERMAN, "de"), (ENGLISH, "en"), (FRENCH, "fr")])
def test_a_page_without_a_declared_language_gets_the_one_of_its_text(text, lang):
    assert page_language(None, text) == lang
    assert page_language("", text) == lang


def test_the_declared_language_wins():
    assert page_language("de-AT", ENGLISH) == "de"


def test_no_guess_on_short_text_numbers_or_text_cld2_cannot_read():
    assert detect(ENGLISH[: MIN_CHARS - 1]) == ""
    assert detect(ENGLISH[: MIN_CHARS + 10]) == "en"  # control: just long enough
    assert detect("w12 w13 4711 " * 40) == ""
    assert detect("a \udcff b\x00 " * 60) == ""  # a lone surrogate, control bytes: no guess, no error
