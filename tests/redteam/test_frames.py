"""Issue 22 item 6: malformed frames from a runner are `protocol-violation`, whatever their shape. A hundred
thousand nested `[` used to raise RecursionError past the frame handling ("runtime_error: judge error"); a frame
whose kind is a list used to raise TypeError in the decoder. Frames are now measured (size, nesting) before they
are parsed and every decoding failure is a protocol error; the judge survives and judges the next candidate."""

from __future__ import annotations

import json
import struct
import time

import pytest

from redteam.attacks import evaluate, kernel
from workbench.eval.wire import runner_messages as protocol
from workbench.eval.wire.transport import MAX_DEPTH, Channel, FrameError

# Writes raw bytes on the runner's protocol socket (descriptor 3, found among the socket descriptors).
_RAW = '''
import json, os, struct
def _send_raw(payload):
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                os.write(int(fd), struct.pack("<II", len(payload), 0) + payload)
        except OSError:
            pass
'''
_FRAMES = {
    "deep arrays": 'b"[" * 100_000 + b"]" * 100_000',
    "deep arrays, unclosed": 'b"[" * 100_000',
    "deep objects": 'b\'{"v":\' * 50_000 + b"1" + b"}" * 50_000',
    "a list as the kind": (
        'b\'{"v":[1,0],"kind":["loaded"],"job":"x","nonce":"x","seq":1,"body":{}}\''),
    # With the runner's own job id, nonce and next sequence number (found through gc), so the body is decoded.
    "an unhashable record tag": (
        '(lambda r: json.dumps({"v": [1, 0], "kind": "loaded", "job": r.job, "nonce": r.nonce, "seq": r.seq_out + 1, '
        '"body": {"kernels": [{"@": [1]}], "seconds": 0.0}}).encode())'
        '(next(o for o in __import__("gc").get_objects() if type(o).__name__ == "Runner"))'),
}


@pytest.mark.parametrize("shape", list(_FRAMES))
def test_a_malformed_frame_is_a_protocol_violation_not_a_judge_error(shape):
    # Sent while the judge waits for the candidate to load (so a frame with the right ids reaches the body decoder).
    started = time.monotonic()
    res = evaluate(kernel(at_import=f"{_RAW}\n_send_raw({_FRAMES[shape]})", in_forward="y = y * 0"))
    assert res.status == "rejected" and res.flags == ["protocol-violation"], (res.status, res.message[:400])
    assert "judge error" not in res.message and "RecursionError" not in res.message
    assert time.monotonic() - started < 120


def test_the_judge_judges_the_next_candidate_after_a_deep_frame():
    evaluate(kernel(at_import=_RAW, in_forward=f'_send_raw({_FRAMES["deep arrays"]})'))
    assert evaluate(kernel()).status == "ok"


@pytest.mark.parametrize("payload", [b"[" * 100_000 + b"]" * 100_000, b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
                                     b'{"a":' * 200 + b"0" + b"}" * 200, b"[" * 70 + b'"' + b"]" * 70 + b'"',
                                     b"[]]", b"[[]"])
def test_the_transport_measures_nesting_before_parsing(payload):
    channel, theirs = Channel.pair()
    try:
        theirs.sendall(struct.pack("<II", len(payload), 0) + payload)
        with pytest.raises(FrameError):
            channel.recv(time.monotonic() + 5)
    finally:
        channel.close()
        theirs.close()


def test_the_limit_leaves_real_frames_and_brackets_inside_strings_alone():
    channel, theirs = Channel.pair()
    try:
        deep_ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
        text = json.dumps({"log": "[" * 10_000 + '\\"]', "n": [[1, 2], [3]]}).encode()
        for payload in (deep_ok, text):
            theirs.sendall(struct.pack("<II", len(payload), 0) + payload)
        assert channel.recv(time.monotonic() + 5)[0] is not None
        assert channel.recv(time.monotonic() + 5)[0]["n"] == [[1, 2], [3]]
    finally:
        channel.close()
        theirs.close()


def test_the_decoder_turns_every_malformed_body_into_a_protocol_error():
    good = protocol.encode(protocol.Loaded(kernels=("k",), seconds=0.1), "j", "n", 1)
    assert protocol.decode(good, job="j", nonce="n", seq=1, allowed=protocol.RUNNER_KINDS).kernels == ("k",)
    bad_bodies = [{**good, "kind": ["loaded"]}, {**good, "kind": {"x": 1}},
                  {**good, "body": {"kernels": [{"@": [1]}], "seconds": 0.1}},
                  {**good, "body": {"kernels": [{"@": {"a": 1}}], "seconds": 0.1}},
                  {**good, "body": {"kernels": "k", "seconds": 0.1}}]
    for frame in bad_bodies:
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(frame, job="j", nonce="n", seq=1, allowed=protocol.RUNNER_KINDS)
