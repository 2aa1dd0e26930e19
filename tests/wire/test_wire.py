"""wire/: schema-driven codec — round trips, and truncated/extended/garbled bytes always raise WireError."""
import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.errors import PrivfaceError
from privface.protocols.im2020 import messages as m
from privface.protocols.kolberg import messages as km
from privface.wire import MAX_MESSAGE_BYTES, WireError, codec, decode, encode, message_type

ids = st.from_regex(r"\A[A-Za-z0-9._@+-]{1,40}\Z")
big = st.integers(min_value=0, max_value=2**2048 - 1)
small_big = st.integers(min_value=0, max_value=2**136 - 1)
lists = st.integers(min_value=0, max_value=6)
u64 = st.integers(min_value=0, max_value=2**64 - 1)
backends = st.sampled_from(["dlib-resnet128", "sface", "pca", "onnx"])

register = st.builds(m.EnrolRequest, ids, backends, big, big, st.integers(0, 2**16 - 1),
                     st.lists(small_big, max_size=6), st.lists(big, max_size=6),
                     st.one_of(st.none(), st.binary(max_size=128)))
messages = st.one_of(
    register,
    st.builds(m.EnrolResponse, ids, st.booleans()),
    st.builds(m.AuthStart, ids, backends, st.lists(small_big, max_size=6), st.lists(big, max_size=6)),
    st.builds(m.AuthChallenge, big, st.lists(big, max_size=6)),
    st.builds(m.AuthFinish, small_big),
    st.builds(m.AuthResult, st.booleans()),
    st.builds(m.RevokeRequest, ids),
    st.builds(m.RevokeResponse, ids, st.booleans()),
    st.builds(m.TPRequest, ids, big, big, st.integers(0, 2**16 - 1),
              st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6)),
    st.builds(m.TPImageRequest, ids, big, big, st.integers(0, 2**16 - 1), st.binary(max_size=64)),
    st.builds(m.TPResponse, st.lists(small_big, max_size=6), st.lists(big, max_size=6), u64, u64,
              st.binary(max_size=128)),
    st.builds(m.SignedEnrolRequest, ids, backends, big, big, st.integers(0, 2**16 - 1), st.lists(small_big, max_size=6),
              st.lists(big, max_size=6), u64, u64, st.binary(max_size=128)),
    st.builds(m.Revoked, ids, u64),
    st.builds(km.ChallengeRequest, ids),  # kolberg's verification challenge (issue 17, finding 6)
    st.builds(km.Challenge, ids, st.binary(min_size=32, max_size=32)),
    st.builds(km.VerifyRequest, ids, backends, st.binary(max_size=64), st.binary(max_size=32)),
)


def _decode_same_type(msg, data):
    return type(msg).from_bytes(data)


@given(messages)
@settings(max_examples=100, deadline=None)
def test_round_trip(msg):
    data = msg.to_bytes()
    assert type(msg).from_bytes(data) == msg
    assert message_type(data) == msg.WIRE_NAME


@given(messages, st.data())
@settings(max_examples=100, deadline=None)
def test_truncated_or_extended_bytes_raise_wire_error(msg, data):
    raw = msg.to_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(WireError):
        _decode_same_type(msg, raw[:cut])
    with pytest.raises(WireError):
        _decode_same_type(msg, raw + data.draw(st.binary(min_size=1, max_size=8)))


@given(messages, st.data())
@settings(max_examples=150, deadline=None)
def test_garbled_bytes_raise_only_wire_error(msg, data):
    raw = bytearray(msg.to_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        out = _decode_same_type(msg, bytes(raw))
    except WireError:
        return
    assert out.to_bytes() == bytes(raw)  # whatever decodes is canonical: it re-encodes to the same bytes


@given(st.binary(max_size=200))
@settings(max_examples=150, deadline=None)
def test_random_bytes_raise_only_wire_error(raw):
    try:
        decode(raw)
    except WireError:
        pass


def test_header_checks():
    raw = m.AuthResult(True).to_bytes()
    with pytest.raises(WireError, match="magic"):
        decode(b"XXX" + raw[3:])
    with pytest.raises(WireError, match="version"):
        decode(raw[:3] + b"\x02" + raw[4:])
    with pytest.raises(WireError, match="unknown message type id"):
        decode(raw[:4] + b"\xff\xff" + raw[6:])
    with pytest.raises(WireError, match="expected a im2020.AuthFinish"):
        m.AuthFinish.from_bytes(raw)
    with pytest.raises(WireError, match="bool"):
        m.AuthResult.from_bytes(raw[:-1] + b"\x02")
    with pytest.raises(WireError, match="must be bytes"):
        decode("not bytes")
    assert issubclass(WireError, PrivfaceError)


def test_limits_and_canonical_form():
    with pytest.raises(WireError, match="exceed"):
        m.AuthChallenge(1, [1] * 1025).to_bytes()
    with pytest.raises(WireError, match="exceeds"):
        m.AuthFinish(2**768).to_bytes()
    with pytest.raises(WireError, match="does not match"):
        m.RevokeRequest("bad id with spaces").to_bytes()
    with pytest.raises(WireError, match="non-negative"):
        m.AuthFinish(-1).to_bytes()
    with pytest.raises(WireError):
        m.AuthResult(1).to_bytes()  # an int is not a bool
    raw = m.AuthFinish(5).to_bytes()
    padded = raw[:6] + b"\x00\x02\x00\x05"
    with pytest.raises(WireError, match="leading zero"):
        m.AuthFinish.from_bytes(padded)
    # an oversized list count is refused before any allocation
    huge = raw[:6] + b"\x00\x01\x01" + b"\xff\xff\xff\xff"
    with pytest.raises(WireError):
        m.AuthChallenge.from_bytes(m.AuthChallenge(1, []).to_bytes()[:-4] + b"\xff\xff\xff\xff")
    with pytest.raises(WireError):
        m.AuthChallenge.from_bytes(huge)
    with pytest.raises(WireError, match="exceeds the maximum"):
        decode(b"\x00" * (MAX_MESSAGE_BYTES + 1))
    with pytest.raises(WireError, match="fields"):
        encode("im2020.AuthResult", {"accepted": True, "extra": 1})


def test_schema_is_self_consistent_and_matches_the_dataclasses():
    schema = json.loads(resources.files("privface.wire").joinpath("schema.json").read_text())
    names = {msg["name"]: [f for f, _ in msg["fields"]] for msg in schema["messages"]}
    assert len({msg["id"] for msg in schema["messages"]}) == len(schema["messages"])
    import dataclasses

    for cls in (m.EnrolRequest, m.EnrolResponse, m.AuthStart, m.AuthChallenge, m.AuthFinish, m.AuthResult,
                m.RevokeRequest, m.RevokeResponse, m.TPRequest, m.TPImageRequest, m.TPResponse,
                m.SignedEnrolRequest, m.Revoked, m.ClientKey, m.LegacyEnrolRequest, m.LegacySignedEnrolRequest,
                m.LegacyClientKey, km.EnrolRequest, km.VerifyRequest, km.IdentifyRequest, km.StoredReference,
                km.LegacyStoredReference):
        assert [f.name for f in dataclasses.fields(cls)] == names[cls.WIRE_NAME]
    assert codec.VERSION == schema["version"]


def test_patterns_match_whole_strings():
    """Issue 17 §9: a subject id with a trailing newline is not a second spelling of the same subject, neither
    when encoding nor when decoding."""
    spec = codec._resolve({"type": "str", "max": 128, "pattern": "^[A-Za-z0-9._@+-]{1,128}$"})
    out = bytearray()
    codec._enc(spec, "erin", out, "id")
    assert codec._dec(spec, codec._Reader(bytes(out)), "id") == "erin"
    with pytest.raises(WireError, match="does not match"):
        codec._enc(spec, "erin\n", bytearray(), "id")
    forged = bytearray()
    codec._enc(codec._resolve({"type": "str", "max": 128}), "erin\n", forged, "id")  # a sender without the check
    with pytest.raises(WireError, match="does not match"):
        codec._dec(spec, codec._Reader(bytes(forged)), "id")


def test_kolberg_nonce_fields_are_capped():
    """A challenge nonce is 32 bytes: a longer one is refused by the codec, on both sides."""
    with pytest.raises(WireError):
        km.Challenge("grace", b"n" * 33).to_bytes()
    raw = km.VerifyRequest("grace", "sface", b"probe", b"n" * 32).to_bytes()
    longer = raw[:-36] + (33).to_bytes(4, "big") + b"n" * 33
    with pytest.raises(WireError, match="exceeds"):
        km.VerifyRequest.from_bytes(longer)


def test_frame_streams_are_read_one_bounded_frame_at_a_time():
    """A frame stream (schema "stream"): u32 length | frame. A frame longer than the reader allows is refused from
    its length alone (nothing more is read); a stream ending inside a length or a frame, or going on after the last
    expected frame, is a WireError."""
    import io

    from privface.wire import FrameReader, framed, framed_size

    a, b = m.AuthResult(True).to_bytes(), m.AuthFinish(2**700).to_bytes()
    body = framed(a) + framed(b)
    assert len(body) == framed_size(len(a)) + framed_size(len(b))
    r = FrameReader(io.BytesIO(body).read)
    assert r.frame(len(a)) == a and r.frame() == b and r.bytes == len(body)
    r.end()
    reads, src = [], io.BytesIO(framed(b"x" * 1000) + b"y" * 1000)

    def counting(n):
        reads.append(n)
        return src.read(n)

    with pytest.raises(WireError, match="exceeds the 999 allowed"):
        FrameReader(counting).frame(999)
    assert sum(reads) == 4  # only the length was read
    with pytest.raises(WireError, match="exceeds"):
        FrameReader(io.BytesIO((MAX_MESSAGE_BYTES + 1).to_bytes(4, "big")).read).frame(1 << 40)
    for cut in (body[:2], body[:len(a)]):
        with pytest.raises(WireError, match="truncated"):
            FrameReader(io.BytesIO(cut).read).frame()
    r = FrameReader(io.BytesIO(body).read)
    r.frame()
    with pytest.raises(WireError, match="after the last"):
        r.end()
    with pytest.raises(WireError):
        framed(b"x" * (MAX_MESSAGE_BYTES + 1))


def test_backend_field_names_only_known_backends():
    """Issue 36: the ``backend`` of an enrolment or probe is one of the face backends, refused otherwise by the codec
    on both sides (no free text a server might log or compare loosely)."""
    with pytest.raises(WireError, match="does not match"):
        km.EnrolRequest("grace", "sface2", b"t").to_bytes()
    raw = bytearray(km.EnrolRequest("grace", "sface", b"t").to_bytes())
    raw[raw.index(b"sface"):raw.index(b"sface") + 5] = b"SFACE"
    with pytest.raises(WireError, match="does not match"):
        km.EnrolRequest.from_bytes(bytes(raw))


def test_legacy_records_read_as_dlib_and_are_refused_on_the_wire():
    """A record stored before issue 36 (no backend) is read as dlib-resnet128, the only backend there was; the same
    bytes sent as a registration are refused (they do not say which backend made Γ)."""
    from privface.errors import ProtocolError
    from privface.protocols.im2020.parties import enrolment_from_bytes
    from privface.protocols.kolberg.messages import stored_reference

    old = m.LegacyEnrolRequest("grace", 5, 7, 64, [1, 2], [3, 4]).to_bytes()
    assert enrolment_from_bytes(old, stored=True) == m.EnrolRequest("grace", "dlib-resnet128", 5, 7, 64, [1, 2],
                                                                     [3, 4])
    with pytest.raises(ProtocolError, match="does not name its face backend"):
        enrolment_from_bytes(old)
    signed = m.LegacySignedEnrolRequest("grace", 5, 7, 64, [1], [3], 9, 10, b"s").to_bytes()
    assert enrolment_from_bytes(signed, stored=True).backend == "dlib-resnet128"
    ref = km.LegacyStoredReference("grace", [1], [b"t"]).to_bytes()
    assert stored_reference(ref) == km.StoredReference("grace", "dlib-resnet128", [1], [b"t"])
