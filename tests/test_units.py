"""app.units: the one place quantities become text."""

from __future__ import annotations

import time

from app.units import format_bytes, format_count, format_last_used, format_size


def test_format_bytes():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.5 KB"
    assert format_bytes(3 * 2**30 + 2**29) == "3.5 GB"
    assert format_bytes(2**60) == "1024.0 PB"


def test_format_size_is_the_windows_short_form():
    assert format_size(812 * 2**20) == "812 MB"
    assert format_size(812.4 * 2**20, mb_digits=1) == "812.4 MB"
    assert format_size(1.27 * 2**30) == "1.27 GB"


def test_format_last_used():
    assert format_last_used(None) == "never"
    t = time.mktime((2025, 3, 1, 14, 5, 0, 0, 0, -1))
    assert format_last_used(t) == "2025-03-01 14:05"


def test_format_count_says_one_thing_and_many_things():
    assert format_count(1, "page") == "1 page"
    assert format_count(0, "page") == "0 pages"
    assert format_count(2, "page") == "2 pages"
    assert format_count(1234, "token") == "1,234 tokens"
    assert format_count(3, "child", "children") == "3 children"
    assert format_count(1, "child", "children") == "1 child"
