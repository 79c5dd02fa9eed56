"""protodef: message classes from .proto text, without protoc."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from gerules.frontends.protodef import file_descriptor, message_classes

PROTO = """
syntax = "proto2";  // a comment
package demo;
/* a block
   comment */
enum Phase { TRAIN = 0; TEST = 1; }
message Outer {
  message Inner { optional int32 v = 1 [default = -3]; }
  enum Kind { A = 0; B = 2; }
  optional Kind kind = 1 [default = B];
  optional float eps = 2 [default = 1e-5];
  optional float frac = 3 [default = .999];
  optional string s = 4 [default = 'x y'];
  repeated int64 dims = 5 [packed = true];
  optional Inner inner = 6;
  optional Phase phase = 7 [default = TEST];
  repeated Outer children = 100;
}
"""


def test_classes_defaults_and_scoping() -> None:
    classes = message_classes(PROTO)
    assert set(classes) == {"Outer", "Outer.Inner"}
    m = classes["Outer"]()
    assert (m.kind, m.s, m.phase, m.inner.v) == (2, "x y", 1, -3)
    assert m.eps == pytest.approx(1e-5) and m.frac == pytest.approx(0.999)
    text_format.Parse("kind: A dims: [1, 2] children { inner { v: 4 } }", m)
    again = classes["Outer"].FromString(m.SerializeToString())
    assert list(again.dims) == [1, 2] and again.children[0].inner.v == 4
    fields = classes["Outer"].DESCRIPTOR.fields_by_name
    assert fields["kind"].enum_type.full_name == "demo.Outer.Kind"  # the nested enum
    assert fields["phase"].enum_type.full_name == "demo.Phase"  # the file-level one
    raw = {f.name: f for f in file_descriptor(PROTO).message_type[0].field}
    assert raw["dims"].options.packed and raw["children"].number == 100


@pytest.mark.parametrize(("text", "message"), [
    ("message M { optional Nope x = 1; }", "resolve name 'Nope'"),
    ("message M { optional int32 x = 1 [deprecated = true]; }", "unsupported option"),
    ("message M { oneof o { int32 x = 1; } }", "line 1: unexpected 'oneof'"),
    ("message M { optional int32 x = 1;", "unexpected end of file"),
    ("message M { optional int32 x = 1; } $", "unexpected character '\\$'"),
])
def test_what_it_does_not_parse_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        message_classes(text)
