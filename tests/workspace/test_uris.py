"""`file:` URIs to paths: the standard converter the core starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_assembly.workspace.uris import standard_converter, uri_to_path


@pytest.mark.parametrize("path", ["/tmp/a b/é.json", "/srv/x%y.yaml", "/plain.json"])
def test_a_path_comes_back_from_its_uri(path: str) -> None:
    assert uri_to_path(Path(path).as_uri()) == Path(path)


@pytest.mark.parametrize("uri", ["untitled:Untitled-1", "https://example.org/a.json", "vector://docs", ""])
def test_other_uris_name_no_path(uri: str) -> None:
    assert uri_to_path(uri) is None


def test_a_host_is_a_unc_share() -> None:
    assert standard_converter("file://server/share/a.json") == "//server/share/a.json"
    assert standard_converter("file://localhost/tmp/a.json") == "/tmp/a.json"
