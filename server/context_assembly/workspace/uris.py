"""`file:` URIs to paths for the core, through one converter the edge may replace.

The core never imports pygls, yet documents and methods arrive named by URI. The LSP server
installs pygls' converter (`pygls.uris.to_fs_path`: Windows drive letters, UNC shares, the
platform's separator) with `use_converter` when it is built, so an editor's URIs are read the way
pygls reads them. Without a server (the CLI, tests of the core) the standard library's
`url2pathname` converts, with the URI's host as a UNC share.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

Converter = Callable[[str], "str | None"]  # a URI -> a file-system path, None when not a file: URI


def standard_converter(uri: str) -> str | None:
    from urllib.request import url2pathname  # late: urllib.request imports http and email (a server never needs it)

    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return None
    path = url2pathname(parts.path)
    return f"//{parts.netloc}{path}" if parts.netloc and parts.netloc != "localhost" else path


_converter: Converter = standard_converter


def use_converter(converter: Converter) -> None:
    """Read every `file:` URI with `converter` from now on (the LSP server installs pygls')."""
    global _converter
    _converter = converter


def uri_to_path(uri: str) -> Path | None:
    """The path a `file:` URI names, or None for any other URI."""
    found = _converter(uri) if isinstance(uri, str) else None
    return Path(found) if found else None


__all__ = ["Converter", "standard_converter", "uri_to_path", "use_converter"]
