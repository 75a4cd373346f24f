"""Counts in words, as every command prints them: "1 sample", "2 samples"."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and its noun: `word` for exactly one, else `words` (default: `word` + "s")."""
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"
