"""Integers beyond 64 bits in JSON input are refused, not read as floats (json_numbers.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_assembly.json_numbers import INT_MIN, UINT_MAX, InexactNumber, inexact_integer, loads_exact


@given(st.integers(min_value=-(2**80), max_value=2**80))
def test_an_integer_is_read_exactly_or_refused(n: int) -> None:
    document = json.dumps({"value": [n], "text": str(n)})
    if INT_MIN <= n <= UINT_MAX:
        assert loads_exact(document) == {"value": [n], "text": str(n)}
        assert inexact_integer(document) is None
    else:
        with pytest.raises(InexactNumber) as refused:
            loads_exact(document)
        assert refused.value.literal == str(n) and "write it as a string" in str(refused.value)


def test_digits_in_strings_and_floats_are_no_integers() -> None:
    assert inexact_integer('{"id": "123456789012345678901234567890"}') is None
    assert loads_exact(b"[1.2345678901234567890123, 1e30]") == [1.2345678901234567, 1e30]
    assert inexact_integer(b"[" * 3000 + b"12345678901234567890123" + b"]" * 3000) is None  # no verdict: too deep


@pytest.mark.parametrize("literal", ["-9223372036854775809", "-9999999999999999999", "18446744073709551616"])
def test_a_rule_files_integer_beyond_64_bits_is_read_exactly(literal: str) -> None:
    """A minus and 19 digits below -2**63: orjson reads a float and the file loader took it (its check
    looked for 20 digits in a row), so `eq -9223372036854775809` matched -9223372036854775808."""
    from context_assembly.documents.json_tree import strict_load

    text = f'{{"value": {literal}}}'
    outcome = strict_load(text, text.encode())
    assert outcome.valid and outcome.value == {"value": int(literal)} and type(outcome.value["value"]) is int
