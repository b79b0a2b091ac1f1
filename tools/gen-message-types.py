"""Write klog/protocol/message_types.py: static types for every Kafka message klog.protocol knows, from the same
schemas the codec compiles (klog/protocol/schemas.py).

    .venv/bin/python tools/gen-message-types.py           # rewrite the module from the schemas
    .venv/bin/python tools/gen-message-types.py --check   # exit 1 if the module is not what the schemas give

For each API (one type per message *version family*: every field of every version, as decoded objects carry them):

- ``<Name>Request`` is a ``typing.Protocol`` over what the request decoder returns (a
  :class:`klog.protocol.struct.Struct` whose attributes are the schema's fields; a field absent in the decoded
  version holds its default). Nested structs are Protocols named ``<Name>Request<StructName>``. Nothing changes at
  run time: the decoder still builds plain Structs, these types only tell the type checker what they hold.
- ``<Name>Response`` is a ``typing.TypedDict`` (``total=False``) of what a handler may return for the encoder: a
  dict whose missing keys encode as the field's default (a nested struct may also be None: its default). Nested
  structs are TypedDicts named ``<Name>Response<StructName>``.

The handlers import the module for the type checker only (``if TYPE_CHECKING:``), so the decode hot path and the
broker's start-up are as before.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODULE = REPO / "klog" / "protocol" / "message_types.py"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from klog.protocol.messages import API_SCHEMAS  # noqa: E402
from klog.protocol.schema import Field, MessageSchema, VersionRange  # noqa: E402

_PRIMITIVES = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint16": "int", "float64": "float",
    "bool": "bool", "string": "str", "bytes": "bytes", "uuid": "UUID",
}


def _versions(r: VersionRange | None) -> str:
    if r is None:
        return "none"
    lo, hi = r
    return f"{lo}+" if hi >= 0x7FFF else (f"{lo}" if lo == hi else f"{lo}-{hi}")


def _nullable(f: Field) -> bool:
    return f.nullable is not None or (f.has_default and f.default is None)


class _Writer:
    """Emits the classes of one message: nested structs first (so names are defined before use), then the message."""

    def __init__(self, message: MessageSchema, *, request: bool) -> None:
        self.message = message
        self.request = request
        self.classes: list[str] = []
        self.shapes: dict[str, str] = {}   # class name -> body, to reuse identical structs and rename differing ones

    def class_name(self, f: Field, body: str, parents: tuple[str, ...]) -> str:
        base = f.struct_name or f.name
        api = self.message.name.removesuffix("Request").removesuffix("Response")
        if base.startswith(self.message.name):
            name = base
        elif base.startswith(api) and base[len(api):len(api) + 1].isupper():   # DescribeLogDirsTopic
            name = self.message.name + base[len(api):]
        else:
            name = self.message.name + base
        i = 0
        candidate = name
        while candidate in self.shapes and self.shapes[candidate] != body:
            i += 1
            candidate = name + "".join(p.strip("[]").title().replace("_", "") for p in parents[-i:]) \
                if i <= len(parents) else f"{name}{i}"
        return candidate

    def field_type(self, f: Field, parents: tuple[str, ...]) -> str:
        if f.fields is not None:
            inner = self.struct(f, parents + (f.name + ("[]" if f.kind == "array" else ""),))
            if f.kind == "array":
                t = f"list[{inner}]" if self.request else f"Sequence[{inner}]"
            elif not self.request:
                return f"{inner} | None"   # the encoder writes a missing (None) struct as its default
            else:
                t = inner
        elif f.kind == "array":
            elem = _PRIMITIVES[f.elem or ""]
            t = f"list[{elem}]" if self.request else f"Sequence[{elem}]"
        elif f.kind == "records":
            return "RequestRecords" if self.request else "ResponseRecords"
        else:
            t = _PRIMITIVES[f.kind]
        return f"{t} | None" if _nullable(f) else t

    def body(self, fields: tuple[Field, ...], parents: tuple[str, ...]) -> str:
        lines = []
        for f in fields:
            notes = [f"versions {_versions(f.versions)}"]
            if f.nullable is not None:
                notes.append(f"nullable {_versions(f.nullable)}")
            if f.tag is not None:
                notes.append(f"tag {f.tag}")
            lines.append(f"    {f.name}: {self.field_type(f, parents)}  # {', '.join(notes)}")
        return "\n".join(lines) if lines else "    pass"

    def struct(self, f: Field, parents: tuple[str, ...]) -> str:
        body = self.body(f.fields or (), parents)
        name = self.class_name(f, body, parents[:-1])
        if name not in self.shapes:
            self.shapes[name] = body
            path = ".".join(parents)
            self.classes.append(self.render(name, body, f"``{path}`` of a decoded request." if self.request
                                            else f"``{path}`` of a response to encode."))
        return name

    def render(self, name: str, body: str, doc: str) -> str:
        base = "Protocol" if self.request else "TypedDict, total=False"
        return f'class {name}({base}):\n    """{doc}"""\n\n{body}'

    def message_class(self) -> str:
        m = self.message
        body = self.body(m.fields, (m.name,))
        what = f"{m.name} v{_versions(m.valid)} (flexible {_versions(m.flexible)})"
        self.classes.append(self.render(m.name, body, f"{what}, as decoded." if self.request
                                        else f"{what}, to encode."))
        return "\n\n\n".join(self.classes)


def render() -> str:
    """The source of klog/protocol/message_types.py for the schemas klog.protocol has now."""
    parts = []
    names = []
    for api_key in sorted(API_SCHEMAS):
        api = API_SCHEMAS[api_key]
        parts.append(f"# --- {api.name} ({api_key}) " + "-" * max(0, 100 - len(api.name) - len(str(api_key))))
        parts.append(_Writer(api.request, request=True).message_class())
        parts.append(_Writer(api.response, request=False).message_class())
        names += [api.request.name, api.response.name]
    by_key = "\n".join(f"    {k}: ({API_SCHEMAS[k].request.name}, {API_SCHEMAS[k].response.name}),"
                       for k in sorted(API_SCHEMAS))
    body = "\n\n\n".join(parts)
    return f'''\
# Generated by tools/gen-message-types.py from klog/protocol/schemas.py.
# Do not edit: re-run the generator (tests/test_message_types.py fails when this file and the schemas disagree).
"""Static types of Kafka's messages: ``<Name>Request`` Protocols over the decoded request Structs and
``<Name>Response`` TypedDicts of what a handler returns to the encoder (see tools/gen-message-types.py).

One type per message version family: each field is listed once with the versions it exists in (a decoded
request carries every field; one absent in its version holds the default). Import it for the type checker only
(``if TYPE_CHECKING: from klog.protocol.message_types import ...``): nothing at run time needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict, Union
from uuid import UUID

from klog.protocol.struct import FileRegion

#: A decoded records field: a view of the request's bytes (None when null).
RequestRecords = Union[memoryview, bytes, None]
#: A records field to encode: bytes, a view, a file region sent with sendfile, or a list of those (None: null).
ResponseRecords = Union[bytes, bytearray, memoryview, FileRegion,
                        Sequence[Union[bytes, bytearray, memoryview, FileRegion]], None]


{body}


#: api key -> (request type, response type)
MESSAGE_TYPES: dict[int, tuple[type, type]] = {{
{by_key}
}}
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the module is up to date")
    args = parser.parse_args()
    source = render()
    if args.check:
        if not MODULE.exists() or MODULE.read_text() != source:
            print(f"{MODULE.relative_to(REPO)} is out of date: run tools/gen-message-types.py", file=sys.stderr)
            return 1
        return 0
    MODULE.write_text(source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
