"""Java ``.properties`` files: ``hoodie.properties`` and ``.hoodie_partition_metadata``.

Written the way ``java.util.Properties.store`` writes them: a comment line, then one
``key=value`` per line, with ``\\``, ``:``, ``=``, ``#``, ``!`` and leading spaces escaped,
and characters outside Latin-1 as ``\\uXXXX``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

_ESCAPES = {
    "\\": "\\\\",
    ":": "\\:",
    "=": "\\=",
    "#": "\\#",
    "!": "\\!",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
}
_UNESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape(text: str, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch == " " and (key or i == 0):
            out.append("\\ ")
        elif ord(ch) > 0xFF:
            out.append("".join(f"\\u{u:04x}" for u in _utf16(ch)))
        else:
            out.append(ch)
    return "".join(out)


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def dumps(props: Mapping[str, str], comment: str | None = None) -> bytes:
    """The properties as a file's bytes (sorted keys, so equal properties give equal
    bytes)."""
    now = dt.datetime.now(dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = [f"#{comment}"] if comment else []
    lines.append(f"#{now}")
    lines += [f"{_escape(k, True)}={_escape(str(v), False)}" for k, v in sorted(props.items())]
    return ("\n".join(lines) + "\n").encode("latin-1")


_LOGICAL = re.compile(r"(?<!\\)(?:\\\\)*\\\n[ \t\f]*")


def loads(data: bytes) -> dict[str, str]:
    """Parses a properties file (comments, ``=`` / ``:`` / space separators, escapes,
    continuation lines).

    Raises:
        ValueError: the bytes are not text.
    """
    text = data.decode("latin-1")
    out: dict[str, str] = {}
    for raw in _LOGICAL.sub("", text).splitlines():
        line = raw.lstrip(" \t\f")
        if not line or line[0] in "#!":
            continue
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    return key, rest.lstrip(" \t\f")


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 5 < len(text) + 1:
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_UNESCAPES.get(nxt, nxt))
        i += 2
    # Surrogate pairs written as two \\u escapes become one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
