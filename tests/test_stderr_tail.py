"""The tail of a stdio server's stderr, as `check --connect` shows it (the pipe itself: see test_cli.py)."""

from __future__ import annotations

import pytest

from mcp_hub.upstream.stderr import StderrTail


def test_lines_arrive_in_pieces_and_only_the_last_are_kept() -> None:
    tail = StderrTail(size=3)
    for chunk in (b"one\ntw", b"o\n\nthree\r\nfo", b"ur\nfi"):
        tail.feed(chunk)
    assert tail.lines() == ["three", "four", "fi"]  # blank lines dropped; the unfinished one shown as it is


@pytest.mark.slow
def test_a_long_line_is_cut_and_bad_bytes_spoil_only_themselves() -> None:
    tail = StderrTail()
    tail.feed(b"x" * 10_000)
    tail.feed(b"y" * 10_000)
    tail.feed(b"\ncaf\xc3")
    tail.feed(b"\xa9 \xff ok\n")
    lines = tail.lines()
    assert [len(line) for line in lines[:-1]] == [500]
    assert lines[-1] == "café \ufffd ok"


def test_the_last_attempts_lines_are_told_apart_from_the_earlier_ones() -> None:
    tail = StderrTail(size=5)
    with tail.capturing():
        tail.feed(b"a\nb\n")
    with tail.capturing():
        tail.feed(b"c\nunfinish")
    assert tail.last_attempt() == ["c", "unfinish"]
    with tail.capturing():  # this child has written nothing yet: the attempt's before it, its unfinished line kept
        assert tail.last_attempt() == ["c", "unfinish"]
        tail.feed(b"ed\n")
    assert tail.lines() == ["a", "b", "c", "unfinish", "ed"]
    assert tail.last_attempt() == ["ed"]
    with tail.capturing(), tail.capturing():  # two that wrote nothing: the last lines
        assert tail.last_attempt() == ["a", "b", "c", "unfinish", "ed"]
    for n in range(7):  # more than the tail keeps: its own lines, those it still has
        tail.feed(f"{n}\n".encode())
    assert tail.last_attempt() == ["2", "3", "4", "5", "6"]
