"""Streaming: UTF-8 held to character boundaries, stop strings held until ruled out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rml_chat.stream import ReplyStream

pytestmark = pytest.mark.offline


def run(chunks: list[bytes], stops: tuple[str, ...] = ()) -> tuple[list[str], ReplyStream]:
    stream = ReplyStream(stops)
    out = [stream.feed(c) for c in chunks]
    out.append(stream.finish())
    return out, stream


def test_an_emoji_split_over_four_byte_tokens_prints_once_whole() -> None:
    wave = "👋".encode()
    out, stream = run([b"Hi ", wave[:1], wave[1:2], wave[2:3], wave[3:], b"!"])
    assert out == ["Hi ", "", "", "", "👋", "!", ""]
    assert "\ufffd" not in "".join(out) and stream.text == "Hi 👋!"


def test_a_stop_string_split_across_tokens_is_never_printed() -> None:
    out, stream = run([b"Sure.\n", b"Us", b"er:", b" more"], stops=("\nUser:",))
    assert "".join(out) == "Sure." and stream.stopped_by == "\nUser:" and stream.text == "Sure."
    assert out[:2] == ["Sure.", ""]  # "\n" and "Us" held while they could start the stop


def test_held_text_is_released_when_the_stop_is_ruled_out() -> None:
    out, _ = run([b"a\n", b"Usual"], stops=("\nUser:",))
    assert out == ["a", "\nUsual", ""]


def test_invalid_bytes_at_the_end_are_shown_replaced() -> None:
    out, stream = run([b"ok ", "é".encode()[:1]])
    assert out == ["ok ", "", "\ufffd"] and stream.text == "ok \ufffd"


def test_bytes_that_can_never_be_valid_are_replaced_where_they_are() -> None:
    out, _ = run([b"a\xffb"])
    assert "".join(out) == "a\ufffdb"


@given(st.binary(max_size=64), st.lists(st.integers(0, 64), max_size=8))
def test_streaming_any_bytes_split_anywhere_equals_the_whole_decode(data: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    out, _ = run(chunks)
    assert "".join(out) == data.decode("utf-8", "replace")


@given(st.text(max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_a_stop_string_anywhere_cuts_the_text_exactly_there(text: str, cuts: list[int]) -> None:
    data = (text + "<STOP>tail").encode()
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    out, stream = run(chunks, stops=("<STOP>",))
    assert "".join(out) == text.split("<STOP>")[0] == stream.text
