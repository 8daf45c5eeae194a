"""The reply path: ids through the tokenizer's stream decoder (whole characters, control tokens hidden, the
first token's space kept) and stop strings held until ruled out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_spec import byte_vocab, spm_tokenizer

from rml_chat.core.answer_stage import AnswerStage
from rml_chat.core.grown_text import PIECES_KEPT, GrownText
from rml_chat.core.reply import AnswerText, ReplyEvent, ReplyFormat, ReplyParser
from tokenizer import Tokenizer

pytestmark = pytest.mark.offline

BYTES = Tokenizer(byte_vocab(["ab", "abc", "<|end|>"], [("a", "b"), ("ab", "c")]))  # id = byte below 256


def scan(chunks: list[str], stops: tuple[str, ...] = ()) -> tuple[list[str], AnswerStage]:
    scanner = AnswerStage(stops)
    out = [scanner.feed(c)[0] for c in chunks]
    out.append(scanner.finish()[0])
    return out, scanner


def answer(events: list[ReplyEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, AnswerText))


def replay(ids: list[int], stops: tuple[str, ...] = (), tok: Tokenizer = BYTES) -> tuple[list[str], ReplyParser]:
    reply = ReplyParser(ReplyFormat(stop_strings=stops), tokenizer=tok)
    out = [answer(reply.feed(i)) for i in ids]
    out.append(answer(reply.finish()))
    return out, reply


def test_a_stop_string_split_across_tokens_is_never_printed() -> None:
    out, scanner = scan(["Sure.\n", "Us", "er:", " more"], stops=("\nUser:",))
    assert "".join(out) == "Sure." and scanner.stopped_by == "\nUser:" and scanner.text == "Sure."
    assert out[:2] == ["Sure.", ""]  # "\n" and "Us" held while they could start the stop


def test_held_text_is_released_when_the_stop_is_ruled_out() -> None:
    out, _ = scan(["a\n", "Usual"], stops=("\nUser:",))
    assert out == ["a", "\nUsual", ""]


def test_held_text_comes_out_at_the_end() -> None:
    out, scanner = scan(["a\nUs"], stops=("\nUser:",))
    assert out == ["a", "\nUs"] and scanner.text == "a\nUs" and scanner.stopped_by is None


@given(st.text(max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_a_stop_string_anywhere_cuts_the_text_exactly_there(text: str, cuts: list[int]) -> None:
    whole = text + "<STOP>tail"
    points = sorted({min(c, len(whole)) for c in cuts})
    out, scanner = scan([whole[a:b] for a, b in zip([0, *points], [*points, len(whole)])], stops=("<STOP>",))
    assert "".join(out) == text.split("<STOP>")[0] == scanner.text


def test_an_emoji_split_over_four_byte_tokens_prints_once_whole() -> None:
    wave = list("👋".encode())
    out, reply = replay([ord("H"), ord("i"), ord(" "), *wave, ord("!")])
    assert out == ["H", "i", " ", "", "", "", "👋", "!", ""]
    assert reply.text == "Hi 👋!"


def test_control_tokens_are_hidden_and_an_unfinished_character_is_replaced_at_the_end() -> None:
    out, reply = replay([257, 258, ord("x"), *list("é".encode())[:1]])
    assert out == ["abc", "", "x", "", "\ufffd"] and reply.text == "abcx\ufffd"


@pytest.mark.parametrize(("ids", "text"), [([ord("a"), 258], "a"), ([ord("a"), 258, ord("b")], "ab"), ([258], "")])
def test_a_control_token_that_is_no_stop_and_no_marker_is_kept_nowhere(ids: list[int], text: str) -> None:
    """A control token that is no stop and no marker of the format (``<|end|>`` here), at the reply's end or
    inside it: left out of the screen and of the message alike (it had reached both at the end)."""
    out, reply = replay(ids)
    assert "".join(out) == reply.text == reply.message.content == text


def test_a_stop_string_spanning_tokens_ends_the_reply() -> None:
    _, reply = replay([*b"ok\nUs", *b"er: hi"], stops=("\nUser:",))
    assert reply.text == "ok" and reply.stopped_by == "\nUser:"


def test_the_first_token_keeps_its_space_the_reply_continues_its_prompt() -> None:
    tok = spm_tokenizer()  # "▁hi": decode() drops the first space, as llama.cpp does for a whole text
    assert tok.decode([7]) == "hi"
    _, reply = replay([7, 7], tok=tok)
    assert reply.text == " hi hi"


@given(st.lists(st.integers(0, 258), max_size=40))
def test_a_reply_is_the_decode_of_its_ids_with_control_tokens_left_out(ids: list[int]) -> None:
    out, reply = replay(ids)
    assert "".join(out) == reply.text == BYTES.decode(ids, skip_special=True)


@given(st.lists(st.text(max_size=5), max_size=3 * PIECES_KEPT), st.integers(-1, 400), st.booleans())
def test_a_grown_text_reads_as_the_pieces_joined(pieces: list[str], size: int, read_between: bool) -> None:
    """The reply parser's texts (the answer, the thought, the whole reply) grow a token's piece at a time
    and are read whole now and then, their end (``tail``) at every token: each reads as the pieces joined."""
    text, joined = GrownText(), ""
    for piece in pieces:
        text += piece
        joined += piece
        if read_between and len(joined) % 7 == 0:
            assert str(text) == joined
        assert text.tail(3) == joined[-3:]
    assert (str(text), len(text), bool(text)) == (joined, len(joined), bool(joined))
    assert text.tail(size) == (joined[-size:] if size > 0 else "")
