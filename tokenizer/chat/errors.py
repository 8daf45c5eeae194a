"""The chat package's one error type (its own, not the tokenizer's: a prompt format is not a vocabulary)."""


class ChatFormatError(ValueError):
    """A conversation a format cannot write (unknown role, a refusal of the template …), or a format that
    cannot be established for a template. The message is one line for the user."""
