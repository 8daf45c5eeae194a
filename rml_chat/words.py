"""Counts in words: "1 token", "2 tokens" (every line the app prints says it this way)."""


def counted(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
