"""klog/protocol/message_types.py (the static request/response types handlers are checked against) is what
tools/gen-message-types.py makes of the schemas the codec compiles, and it names exactly the fields the decoder
puts on its Structs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from klog.protocol import messages
from klog.protocol.message_types import MESSAGE_TYPES

REPO = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_message_types", REPO / "tools" / "gen-message-types.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_message_types_module_is_what_the_schemas_give():
    generator = _load_generator()
    assert generator.MODULE.read_text() == generator.render(), (
        "klog/protocol/message_types.py differs from its generator's output: run tools/gen-message-types.py")


def test_every_api_has_a_request_and_a_response_type():
    assert set(MESSAGE_TYPES) == set(messages.API_SCHEMAS)
    for api_key, (request_type, response_type) in MESSAGE_TYPES.items():
        name = messages.API_SCHEMAS[api_key].name
        assert (request_type.__name__, response_type.__name__) == (name + "Request", name + "Response")


def test_types_name_the_fields_decoded_structs_carry():
    # A decoded message carries every field of its family (absent ones hold defaults): the types list the same.
    for api_key, (request_type, response_type) in MESSAGE_TYPES.items():
        lo, hi = messages.versions(api_key)
        for version in sorted({lo, hi}):
            for response, typ in ((False, request_type), (True, response_type)):
                body = messages.encode_body(api_key, version, {}, response=response)
                decoded, _ = messages.decode_body(api_key, version, body, response=response)
                fields = {k for k in vars(decoded) if k != "_unknown_tags"}
                assert fields == set(typ.__annotations__), (typ.__name__, version)
