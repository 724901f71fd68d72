"""Confinement: every name or path a reference brings stays inside its base directory (SPEC §5.1, §10).

Used by every store that turns a name into a file path (`markdown://`, `file://`) and by templates
that build such names. The checks run on the text as given and on every percent-decoded layer of it,
so `..%2f`, `%2e%2e/` and their double-encoded forms are refused like a plain `../`. A name that
passes the lexical checks is then resolved with symlinks followed and must still land inside the
base directory. Opaque keys (KV, JSON, working memory, blobs) never become paths; they only must
not hold NUL characters.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote

from ..errors import InvalidParamsError

MAX_KEY_LENGTH = 1024
MAX_PATH_LENGTH = 4096

# Enough to unwrap any sane nesting of `%25`; deeper nesting is refused outright.
_MAX_DECODE_LAYERS = 4
_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def refuse(message: str, pointer: str = "/uri") -> InvalidParamsError:
    return InvalidParamsError(message, [{"path": pointer, "message": message}])


def decoded_layers(text: str) -> list[str]:
    """`text` and each successive percent-decoding of it, until decoding changes nothing."""
    layers = [text]
    for _ in range(_MAX_DECODE_LAYERS):
        current = layers[-1]
        if "%" not in current:
            return layers
        decoded = unquote(current, errors="surrogateescape")
        if decoded == current:
            return layers
        layers.append(decoded)
    if "%" in layers[-1] and unquote(layers[-1], errors="surrogateescape") != layers[-1]:
        raise refuse(f"{text!r} is refused: too many layers of percent-encoding")
    return layers


def check_key(text: object, *, what: str = "key", pointer: str = "/uri") -> str:
    """An opaque key: any non-empty string without NUL, of a sane length. Never used as a path."""
    if not isinstance(text, str) or not text:
        raise refuse(f"the {what} must be a non-empty string", pointer)
    if "\x00" in text:
        raise refuse(f"the {what} {text!r} is refused: it contains a NUL character", pointer)
    if len(text) > MAX_KEY_LENGTH:
        raise refuse(f"the {what} is too long ({len(text)} characters; at most {MAX_KEY_LENGTH})", pointer)
    return text


def check_relative_path(
    text: object, *, what: str = "path", pointer: str = "/uri", allow_hidden: bool = True
) -> str:
    """A relative path with `/` separators, refused when it could reach outside its base.

    Returns the path with `.` segments dropped. `allow_hidden=False` also refuses segments that
    start with a dot (markdown notes: such names collide with the temp files of atomic writes).
    """
    if not isinstance(text, str) or not text:
        raise refuse(f"the {what} must be a non-empty string", pointer)
    if len(text) > MAX_PATH_LENGTH:
        raise refuse(f"the {what} is too long ({len(text)} characters; at most {MAX_PATH_LENGTH})", pointer)
    for layer in decoded_layers(text):
        _check_layer(text, layer, what, pointer, allow_hidden)
    segments = [segment for segment in text.split("/") if segment != "."]
    if not segments:
        raise refuse(f"the {what} {text!r} names no file", pointer)
    return "/".join(segments)


def check_name(text: object, *, what: str = "name", pointer: str = "/uri") -> str:
    """One path segment (a file name without directories)."""
    name = check_relative_path(text, what=what, pointer=pointer)
    if "/" in name:
        raise refuse(f"the {what} {text!r} is refused: it must not contain '/'", pointer)
    return name


def _check_layer(original: str, layer: str, what: str, pointer: str, allow_hidden: bool) -> None:
    def fail(reason: str) -> InvalidParamsError:
        return refuse(f"the {what} {original!r} is refused: {reason} (references stay inside the workspace)",
                      pointer)

    if "\x00" in layer:
        raise fail("it contains a NUL character")
    if _CONTROL.search(layer):
        raise fail("it contains a control character")
    if "\\" in layer:
        raise fail("backslashes are not path separators here; use '/'")
    if layer.startswith("/"):
        raise fail("absolute paths are not allowed")
    if _DRIVE.match(layer):
        raise fail("drive letters are not allowed")
    for segment in layer.split("/"):
        if segment == "":
            raise fail("empty path segments ('//' or a trailing '/') are not allowed")
        if segment == ".":
            continue
        if set(segment) == {"."}:
            raise fail(f"'{segment}' segments are not allowed")
        if _DRIVE.match(segment):
            raise fail("drive letters are not allowed")
        if not allow_hidden and segment.startswith("."):
            raise fail("names starting with '.' are not allowed")


def is_inside(base: Path | str, target: Path | str) -> bool:
    """Whether `target` (already resolved) is `base` (already resolved) or below it."""
    base_text, target_text = os.fspath(base), os.fspath(target)
    try:
        return os.path.commonpath([base_text, target_text]) == base_text
    except ValueError:  # different drives on Windows
        return False


def resolve_inside(
    base: Path | str, relative: object, *, what: str = "path", pointer: str = "/uri", allow_hidden: bool = True
) -> Path:
    """The real path (symlinks followed) of `relative` under `base`; refused when it leaves `base`."""
    clean = check_relative_path(relative, what=what, pointer=pointer, allow_hidden=allow_hidden)
    real_base = _real_base(os.fspath(base))
    target = _follow(real_base, [part for part in clean.split("/") if part])
    if not is_inside(real_base, target):
        raise refuse(f"the {what} {relative!r} is refused: it resolves outside its directory "
                     "(a symbolic link leaves the workspace)", pointer)
    return Path(target)


@functools.lru_cache(maxsize=64)
def _real_base(base: str) -> str:
    # The workspace's own directories: resolving their whole path (an lstat per component) on
    # every note read cost more than the read itself (bench/assemble).
    return os.path.realpath(base)


def _follow(real_base: str, parts: list[str]) -> str:
    """`real_base` joined with `parts`, resolving symbolic links only where there are any."""
    path = real_base
    for index, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # the rest does not exist (yet): nothing below it can be a link
            return os.path.join(path, *parts[index + 1:])
        if stat.S_ISLNK(mode):
            path = os.path.realpath(path)
    return path
