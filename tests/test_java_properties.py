"""klog.metadata.java_properties reads a properties document as the ``javaproperties`` library does (Java's
``Properties.load``): the library is the oracle, on hand-picked documents and on generated ones made of the
characters the format gives a meaning to."""

from __future__ import annotations

import random

import javaproperties
import pytest

from klog.metadata.java_properties import InvalidUEscape, parse_properties

#: Pieces the generated documents are made of: separators, blanks, comment marks, line ends, escapes (valid and
#: not), a surrogate pair, continuations and plain text.
PIECES = list("ab=: \t\f\\#!\n\r") + ["\r\n", "u", "U", "0", "D", "8", "E", "9", "é", "\\u0041", "\\uD83D", "\\uDE00",
                                       "\\n", "\\\n", "\\\\", "\\u00"]
GENERATED_DOCUMENTS = 20_000


def outcome_of(parse, text: str) -> tuple[str, object]:
    try:
        return "pairs", parse(text)
    except (javaproperties.InvalidUEscapeError, InvalidUEscape):
        return "invalid \\u escape", None


@pytest.mark.parametrize("text", [
    "",
    "# a comment\n! another\n\n   \t\n",
    "log.dirs=/tmp/a\nnum.partitions = 3\n",
    "key value with  spaces  \nk2:v2\nk3\t=\t:v3\n",
    "listeners=PLAINTEXT://127.0.0.1:9092,\\\n    CONTROLLER://127.0.0.1:9093\n",
    "a\\=b=c\\:d\n\\ lead=x\n",
    "tab=\\t|\\n|\\r|\\f|\\q\n",
    "uni=\\u00e9\\uD83D\\uDE00\n",
    "dup=1\ndup=2\n",
    "crlf=1\r\ncr=2\rlf=3\n",
    "continued at the end\\",
    "# a comment ending in a backslash \\\nnext=line\n",
    "key\\\n\n",
    "bad=\\u12G4\n",
    "short=\\u12",
])
def test_known_documents_read_as_javaproperties_reads_them(text: str) -> None:
    assert outcome_of(parse_properties, text) == outcome_of(javaproperties.loads, text)


def test_generated_documents_read_as_javaproperties_reads_them() -> None:
    rng = random.Random(38)
    differ = []
    for _ in range(GENERATED_DOCUMENTS):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
        if outcome_of(parse_properties, text) != outcome_of(javaproperties.loads, text):
            differ.append(text)
    assert differ == []
