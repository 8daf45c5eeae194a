"""The decoder stage: ids -> the raw bytes each token stands for -> text (the last stage of the pipeline).

``Tokenizer.decoder`` is a ``Decoder`` over the vocabulary's token texts and types, with the spec's decoder
rules. A stream asks for one token at a time (``token_bytes``, ``StreamDecoder``); a decode of a sequence
builds the whole table once (``token_bytes.byte_table``). Worked example (Llama 2, SentencePiece)::

    decode_bytes([15043, 3186]) -> b"Hello world"   ("▁Hello" "▁world": llama.cpp drops the first space)

    stream = tok.stream()
    stream.feed(15043) -> "Hello";  stream.feed(3186) -> " world";  stream.finish() -> ""
    (an emoji that arrives as four byte tokens comes out once, whole, on the fourth)
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from functools import cached_property

from ..spec import LeadingSpace, ModelKind, SpacePrefix, TokenizerError, TokenizerSpec, TokenType
from .token_bytes import byte_fallback_text, byte_table, one_token

_CONTROLISH = frozenset({TokenType.CONTROL, TokenType.UNKNOWN})


class Decoder:
    """The decoder stage of one vocabulary (see the module docstring)."""

    def __init__(self, spec: TokenizerSpec, types: list[int]):
        self.spec = spec
        self._tokens, self.types = spec.vocab.tokens, types
        self.vocab_size = len(self._tokens)
        self._pieces: dict[int, bytes] = {}  # token_bytes of single tokens, before the whole table exists

    def check(self, token_id: int) -> int:
        """``token_id`` itself, or a TokenizerError naming it out of range."""
        if not 0 <= token_id < self.vocab_size:
            raise self._out_of_range(token_id)
        return token_id

    def _out_of_range(self, token_id: int) -> TokenizerError:
        return TokenizerError(f"{self.spec.source}: token id {token_id} is out of range "
                              f"(vocabulary has {self.vocab_size} tokens)")

    @cached_property
    def _bytes(self) -> list[bytes]:
        """Raw bytes of every token (``token_bytes.byte_table``), built on the first decode."""
        return byte_table(self.spec.model.kind, self._tokens, self.types)

    @cached_property
    def leading(self) -> LeadingSpace:
        """The decoder's leading-space rule, resolved: STRIP_ADDED holds only where the encoder adds a
        space (SentencePiece, ``SpacePrefix.EVERY_FRAGMENT``), else it is KEEP."""
        spec = self.spec
        rule = spec.decoder.leading_space
        if rule is LeadingSpace.STRIP_ADDED and not (spec.model.kind is ModelKind.SENTENCEPIECE and
                                                     spec.normalizer.space_prefix is SpacePrefix.EVERY_FRAGMENT):
            return LeadingSpace.KEEP
        return rule

    @cached_property
    def _bytes_skip(self) -> list[bytes]:
        return [b"" if t in _CONTROLISH else b for b, t in zip(self._bytes, self.types)]

    def _token_parts(self, ids: list[int], skip_special: bool) -> list[bytes]:
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            raise self._out_of_range(next(i for i in ids if not 0 <= i < self.vocab_size))
        return list(map((self._bytes_skip if skip_special else self._bytes).__getitem__, ids))

    def decode_bytes(self, ids: Iterable[int], *, skip_special: bool = False) -> bytes:
        """Concatenated raw bytes of the tokens (control tokens left out with skip_special)."""
        ids = list(ids)
        parts = self._token_parts(ids, skip_special)
        if self.leading is LeadingSpace.STRIP:  # HF's Strip decoder: the decoded text's first space
            joined = b"".join(parts)
            return joined[1:] if joined.startswith(b" ") else joined
        if self.leading is LeadingSpace.STRIP_ADDED and parts and parts[0].startswith(b" "):
            parts[0] = parts[0][1:]  # llama.cpp: the first token's space ("<s>" first: " Hello" keeps its own)
        return b"".join(parts)

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        """Text of the tokens; invalid UTF-8 is replaced by U+FFFD — for a tokenizer.json whose decoder
        has ByteFallback, as HF does it: one U+FFFD per byte token of an invalid run of them."""
        if not self.spec.decoder.byte_fallback:
            return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", "replace")
        ids = list(ids)
        parts = self._token_parts(ids, False)  # range-checked; skipped control tokens are left out, as HF drops them
        kept = [n for n, i in enumerate(ids) if not (skip_special and self.types[i] in _CONTROLISH)]
        text = byte_fallback_text([parts[n] for n in kept], [self.types[ids[n]] == TokenType.BYTE for n in kept])
        return text[1:] if self.leading is LeadingSpace.STRIP and text.startswith(" ") else text

    def token_bytes(self, token_id: int) -> bytes:
        """Raw bytes one token stands for (a control token: its text); one at a time until a decode has
        built the whole table."""
        if "_bytes" in self.__dict__:
            return self._bytes[self.check(token_id)]
        piece = self._pieces.get(token_id)
        if piece is None:
            self.check(token_id)
            piece = self._pieces[token_id] = one_token(self.spec.model.kind, self._tokens[token_id], self.types[token_id])
        return piece

    def stream(self, *, skip_special: bool = False, continuation: bool = False) -> StreamDecoder:
        """A decoder fed one id at a time, for printing a reply as it is generated (see ``StreamDecoder``).
        ``continuation``: the ids continue a text (a reply after its prompt), so no rule for the start of
        a text applies: the first token keeps its leading space, as llama.cpp's ``token_to_piece`` gives it."""
        return StreamDecoder(self, skip_special, continuation)


class StreamDecoder:
    """Ids in one at a time, text out as soon as it is whole: what ``feed`` returned, joined with ``finish()``,
    is exactly ``decode(ids, skip_special=...)`` of the ids fed. Held back: an unfinished UTF-8 character
    (and, for a tokenizer.json whose decoder has ByteFallback, a run of byte tokens, which HF decodes as a
    whole); ``finish`` gives the rest, an unfinished character replaced by U+FFFD. With ``continuation`` the
    text is the tokens' bytes joined, as decoding them after the text they continue would add them: no
    leading space is stripped."""

    def __init__(self, tokenizer: Decoder, skip_special: bool = False, continuation: bool = False):
        self._tok, self._skip = tokenizer, skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._run: list[bytes] = []  # ByteFallback decoders: byte tokens not decoded yet
        # has a token (llama.cpp's rule) or a byte (HF's Strip) been seen yet: for a continuation, always
        self._started = continuation

    def feed(self, token_id: int) -> str:
        tok = self._tok
        data = tok.token_bytes(token_id)
        skipped = self._skip and tok.types[token_id] in _CONTROLISH
        if tok.spec.decoder.byte_fallback:
            if skipped:  # left out altogether, as HF drops it: byte runs on both sides join
                return ""
            if tok.types[token_id] == TokenType.BYTE:
                self._run.append(data)
                return ""
            return self._strip(self._flush_run() + data.decode("utf-8", "replace"))
        data = b"" if skipped else data  # as decode_bytes: the skipped token still counts as the first
        if not self._started:
            if tok.leading is LeadingSpace.STRIP_ADDED:
                self._started = True  # llama.cpp: the first token's own space only
                data = data[1:] if data.startswith(b" ") else data
            elif tok.leading is LeadingSpace.STRIP and data:
                self._started = True  # HF's Strip: the first byte of the text
                data = data[1:] if data.startswith(b" ") else data
        return self._utf8.decode(data)

    def finish(self) -> str:
        """The rest: a held byte-token run, an unfinished character (replaced)."""
        if self._tok.spec.decoder.byte_fallback:
            return self._strip(self._flush_run())
        return self._utf8.decode(b"", final=True)

    def _flush_run(self) -> str:
        run, self._run = self._run, []
        return byte_fallback_text(run, [True] * len(run)) if run else ""

    def _strip(self, text: str) -> str:
        if not self._started and text:
            self._started = True
            if self._tok.leading is LeadingSpace.STRIP and text.startswith(" "):
                return text[1:]
        return text

