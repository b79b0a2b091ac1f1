"""Java ``.properties`` text to key/value pairs, as ``java.util.Properties.load`` reads it.

Kept here rather than taken from the ``javaproperties`` library, whose package also imports its XML and writing
modules (xml, urllib.request, email...): about 4 MiB of RSS for every broker, which reads its meta.properties at
start-up. tests/test_java_properties.py checks this reader against that library on generated documents.
"""

from __future__ import annotations

__all__ = ["InvalidUEscape", "parse_properties"]

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class InvalidUEscape(ValueError):
    """A ``\\u`` escape not followed by four hex digits (Java: "Malformed \\uxxxx encoding")."""


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a properties document (later keys override earlier ones)."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _natural_lines(text: str) -> list[str]:
    # Only LF, CR LF and CR end a line (not the other characters str.splitlines knows).
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _continued(line: str) -> bool:
    """Whether ``line`` ends in an odd number of backslashes (the next line continues it)."""
    stripped = line.rstrip("\\")
    return (len(line) - len(stripped)) % 2 == 1


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None  # a logical line continued on the next natural line
    for natural in _natural_lines(text):
        if pending is None:
            natural = natural.lstrip(_BLANK)
            if not natural or natural[0] in "#!":
                continue  # blank lines and comments (a comment is never continued)
        else:
            natural = pending + natural.lstrip(_BLANK)
        if _continued(natural):
            pending = natural[:-1]
        else:
            pending = None
            if natural:  # a continuation onto a blank line, with nothing before it, makes no entry
                lines.append(natural)
    if pending:  # a continuation at the end of the text: the backslash is dropped
        lines.append(pending)
    return lines


def _split(line: str) -> tuple[str, str]:
    """The raw key and value of a logical line: the key ends at the first unescaped ``=``, ``:`` or blank; blanks
    around the separator, and one ``=`` or ``:`` after blanks, are not part of the value."""
    escaped = False
    end = len(line)
    value_start = end
    has_separator = False
    for i, c in enumerate(line):
        if not escaped and c in "=:":
            end, value_start, has_separator = i, i + 1, True
            break
        if not escaped and c in _BLANK:
            end, value_start = i, i + 1
            break
        escaped = not escaped if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _BLANK:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:end], line[value_start:]


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        i += 1
        if c != "\\" or i >= n:
            out.append(c)  # a lone backslash ending the text stays (it cannot escape anything)
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i:i + 4]
            if len(digits) < 4 or not set(digits) <= _HEX:
                raise InvalidUEscape(f"invalid \\u escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    # \\u escapes of a surrogate pair make one character, as in Java's UTF-16 strings.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
