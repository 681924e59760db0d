"""``crawl.links.Remembered``: what a worker remembers having stored, in a table of fixed size."""

from __future__ import annotations

import random

import pytest

from politecrawl.crawl.links import Remembered


def test_a_key_added_is_remembered_and_others_are_not():
    known = Remembered(1 << 10)
    keys = [7 * i + 1 for i in range(200)]  # the first 100 all in slots of their own
    known.add(keys[:100])
    assert all(key in known for key in keys[:100])
    assert not any(key in known for key in keys[100:])


def test_the_key_zero_and_negative_keys():
    known = Remembered(8)
    assert 0 not in known  # an empty slot holds 0: the key 0 is kept as 1
    known.add([0, -5])
    assert 0 in known and -5 in known
    assert -13 not in known  # -13 names the slot of -5 (same low bits), a different key


def test_a_later_key_for_a_slot_pushes_the_earlier_out():
    known = Remembered(16)
    known.add([3])
    known.add([3 + 16])
    assert 3 + 16 in known and 3 not in known


def test_its_size_is_fixed_whatever_it_is_given():
    known = Remembered(1 << 12)
    before = known._table.buffer_info()
    rng = random.Random(7)
    known.add(rng.getrandbits(64) - (1 << 63) for _ in range(100_000))
    assert known._table.buffer_info()[1] == before[1] == 1 << 12
    # Most of the last slot's worth of keys are still there (direct-mapped: ~63 % of n = slots).
    last = [rng.getrandbits(64) - (1 << 63) for _ in range(1 << 12)]
    known.add(last)
    assert sum(key in known for key in last) > 0.55 * len(last)


@pytest.mark.parametrize("slots", [0, 3, 1000, -8])
def test_slots_must_be_a_power_of_two(slots):
    with pytest.raises(ValueError):
        Remembered(slots)
