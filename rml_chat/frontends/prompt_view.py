"""What the model sees: a prompt's ids shown as text, each special token marked.

``rml-chat --show-prompt`` and the REPL's ``/prompt`` use it. On a terminal a special token is shown in
reverse video; elsewhere between ``⟦`` and ``⟧``. Example (SmolLM2)::

    ⟦<|im_start|>⟧system
    You are a helpful AI assistant named SmolLM, trained by Hugging Face⟦<|im_end|>⟧
    ⟦<|im_start|>⟧user
    Hi⟦<|im_end|>⟧
    ⟦<|im_start|>⟧assistant
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizer import Tokenizer, TokenType

from ..terminal import REVERSE, Styled, style, visible

_MARKED = frozenset({TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN})


def marked_prompt(tokenizer: Tokenizer, ids: Sequence[int], color: bool) -> str:
    """The prompt's text with every control or user-defined token marked (the rest decoded as is; a
    user-defined token that is only whitespace, as Gemma's newline tokens, is shown as text). With ``color``
    (a terminal) the text is made visible (``terminal.visible``): a message's escape bytes drive nothing."""
    out: list[str] = []
    run: list[int] = []
    for token_id in ids:
        kind = tokenizer.token_type(token_id)
        if kind in _MARKED and (kind != TokenType.USER_DEFINED or tokenizer.id_to_token(token_id).strip()):
            out.append(visible(_text(tokenizer, run)) if color else _text(tokenizer, run))
            run.clear()
            text = tokenizer.id_to_token(token_id)
            out.append(style(text, REVERSE) if color else f"⟦{text}⟧")
        else:
            run.append(token_id)
    out.append(visible(_text(tokenizer, run)) if color else _text(tokenizer, run))
    return Styled("".join(out)) if color else "".join(out)


def _text(tokenizer: Tokenizer, ids: list[int]) -> str:
    """The tokens' bytes as text (spaces kept as the model sees them, unlike a decode's first token)."""
    return b"".join(map(tokenizer.token_bytes, ids)).decode("utf-8", "replace")
