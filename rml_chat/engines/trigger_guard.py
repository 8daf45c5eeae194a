"""A lazy grammar's trigger, watched so that a token which fires it can't crash the process.

llama.cpp's lazy grammar (a tool call's: free text until the call opens) keeps the reply's text while it
waits; when one of its patterns is found there, it replays that text from the pattern's group on into the
grammar. If the token that completed the trigger goes on past it with text the grammar refuses, the
replay throws a C++ exception (``Unexpected empty grammar stack after accepting piece``), which crosses
the C API and ends the process with ``std::terminate``. Real models do this: a token ``functional`` past a
trigger ``function``, ``<tool_call>\\n{"`` past ``<tool_call>`` (llama.cpp issues 12597, 26787;
llama-server answers that request with an error).

The guard mirrors the grammar's wait in Python: the same patterns over the same text (each token's piece as
llama.cpp's vocabulary gives it, as bytes). Before a token is accepted into the chain, ``refuses(token)``
says whether it would fire a trigger with text after the match that the grammar refuses. That text is
checked by a second, eager copy of the grammar, fed the tokens of the whole replayed text, each tried with
``llama_sampler_apply`` before it is accepted (apply only marks a token impossible; accept is what throws).
Such a token is left out and the step drawn again (``draw``), as llama.cpp's common sampler draws again
when the token it drew breaks an eager grammar. A token that ends where the trigger ends replays only the
trigger, as before: it is not checked.

Checking costs a Python step (the candidates built in numpy, ~0.1-0.4 ms), so a step takes it only where
some token could fire a trigger now (``may_fire``): where the text so far ends with the start of a text a
pattern's match ends with (``LazyGrammar.ends``), or where the vocabulary has a token holding one of those
texts whole with more after it. Elsewhere llama.cpp samples alone, as without the guard. For example, with
the trigger ``<tool_call>``, after ``Let me check. <tool`` the next step is checked; after ``Let me
check.`` it is not, unless some token's text is ``<tool_call>`` and more.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Collection, Sequence
from types import ModuleType

from .base import trigger_patterns
from .candidates import Candidates, allowed


def ends_of(grammar: str) -> tuple[bytes, ...]:
    """The texts a lazy grammar's pattern matches end with, as bytes (``LazyGrammar.ends``)."""
    return tuple(e.encode("utf-8") for e in getattr(grammar, "ends", ()))


class TriggerGuard:
    """The wait of one lazy grammar (``gbnf``), for one reply. ``pieces``: each token's text (``piece``);
    ``holding``: the tokens whose text holds one of ``ends_of(gbnf)`` whole with more after it;
    ``tokenize``: text to ids, special tokens read as such."""

    def __init__(self, lib: ModuleType, vocab: object, gbnf: str, pieces: Sequence[bytes], holding: Collection[int],
                 tokenize: Callable[[bytes], list[int]]) -> None:
        self._lib, self._vocab, self._gbnf, self._tokenize = lib, vocab, gbnf, tokenize
        self._pieces = pieces
        self._patterns = []
        for pattern in trigger_patterns(gbnf):
            whole = pattern.startswith("^") and pattern.endswith("$")  # (llama.cpp matches those against the whole text)
            self._patterns.append((re.compile(pattern.encode("utf-8")), whole))  # (bytes, as llama.cpp's buffer)
        self._ends = ends_of(gbnf)
        self._starts = {end[:k] for end in self._ends for k in range(1, len(end))}
        self._always = bool(holding)
        self._text = b""
        self.waiting = True
        self._eager: object | None = None
        self._candidates: Candidates | None = None  # (every token's entry, for the steps drawn here)

    def may_fire(self) -> bool:
        """Whether some token could fire a trigger at this step with text past it."""
        return self._always or any(self._text.endswith(start) for start in self._starts)

    def refuses(self, token: int) -> bool:
        """Whether accepting ``token`` now would fire the trigger with text past it that the grammar refuses."""
        text = self._text + self._pieces[token]
        fired = self._fired(text, len(self._pieces[token]))
        if fired is None:
            return False
        start, end = fired
        return end < len(text) and not self._takes(text[start:])

    def draw(self, chain: object, logits: object) -> int:
        """A step of ``llama_sampler_sample`` taken here (``chain``: the sampler chain; ``logits``: the
        position's, a C pointer): the candidates built from the logits, the chain applied, and a token the
        guard refuses left out and the step drawn again, before the chain accepts the token."""
        lib = self._lib
        if self._candidates is None:
            self._candidates = Candidates(lib, len(self._pieces))
        left_out: list[int] = []
        while True:
            token, _ = self._candidates.apply(chain, logits, left_out)
            if token >= 0 and not self.refuses(token):
                break
            left_out.append(token)
            if token < 0 or len(left_out) > 64:
                raise RuntimeError("the tool call's grammar refuses every token the model writes")
        lib.llama_sampler_accept(chain, token)
        self.accepted(token)
        return token

    def accepted(self, token: int) -> None:
        """``token`` went into the chain: its piece joins the text waited on; the wait ends where a pattern is found."""
        if not self.waiting:
            return
        self._text += self._pieces[token]
        if self._fired(self._text, len(self._pieces[token])) is not None:
            self.waiting, self._text = False, b""

    def close(self) -> None:
        if self._eager is not None:
            self._lib.llama_sampler_free(self._eager)
            self._eager = None

    def _fired(self, text: bytes, new: int) -> tuple[int, int] | None:
        """Where the grammar would start (the first non-empty group, as llama-grammar.cpp takes it) and where
        the match ends, for the first pattern found in ``text``; None while none is. (No pattern was found
        before its last ``new`` bytes: one can be now only where one of the ends reaches into them.)"""
        if not any(end in text[-(new + len(end) - 1):] for end in self._ends if new):
            return None
        for regex, whole in self._patterns:
            match = regex.fullmatch(text) if whole else regex.search(text)
            if match is None:
                continue
            groups = [i for i in range(1, regex.groups + 1) if match.group(i)]
            return (match.start(groups[0]) if groups else match.start()), match.end()
        return None

    def _takes(self, text: bytes) -> bool:
        """Whether the grammar, from its start, takes ``text``: its tokens (where their pieces spell it
        exactly; else not), each tried before it is accepted."""
        lib = self._lib
        tokens = self._tokenize(text)
        if b"".join(self._pieces[t] for t in tokens) != text:  # (a SentencePiece space put before it, say)
            return False
        if self._eager is None:
            self._eager = lib.llama_sampler_init_grammar(self._vocab, self._gbnf.encode("utf-8"), b"root")
        lib.llama_sampler_reset(self._eager)
        for token in tokens:
            if not allowed(lib, self._eager, [token]) or lib.llama_vocab_is_eog(self._vocab, token):
                return False
            lib.llama_sampler_accept(self._eager, token)
        return True


def piece(lib: ModuleType, vocab: object, token: int) -> bytes:
    """A token's text as llama.cpp's grammar reads it (special tokens as their text)."""
    size = 64
    while True:
        buffer = ctypes.create_string_buffer(size)
        n = lib.llama_token_to_piece(vocab, token, buffer, size, 0, True)
        if n >= 0:
            return buffer.raw[:n]
        size = -n


def holding(pieces: list[bytes], ends: tuple[bytes, ...]) -> frozenset[int]:
    """The tokens whose text holds one of ``ends`` whole with more after it.

        >>> sorted(holding([b"<tool", b"<tool_call>", b"<tool_call>\\n{"], (b"<tool_call>",)))
        [2]
    """
    return frozenset(i for i, p in enumerate(pieces) if any(e in p[:-1] for e in ends))
