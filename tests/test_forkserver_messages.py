"""The judge/fork-server channel (issue 16): typed, versioned messages decoded strictly. A request the server
cannot read is answered with Refused (never guessed at), a reply the judge did not ask for is an error, and the
old `{"op": ...}` dicts are no longer understood."""

from __future__ import annotations

import time

import pytest

from workbench.eval.judge.runners.process import ForkServer, RunnerProcess
from workbench.eval.wire import forkserver_messages as m

ALL = [m.Spawn(job="j", nonce="n", device="cpu", address_space=1 << 30, extra_binds=(("/a", "/b"),),
               writable_binds=(("/c", "/tmp/triton"),), workdir="/tmp/w"),
       m.Spawn(job="j", nonce="n", device="cuda:1"), m.Wait(pid=12), m.Exit(), m.Hello(sandbox="none", reason="r", pid=3),
       m.Spawned(pid=4, inner_pid=5, sandbox="namespaces"), m.Status(pid=4, status=9), m.Refused(reason="why")]


@pytest.mark.parametrize("message", ALL, ids=lambda msg: msg.kind)
def test_every_message_survives_encoding(message):
    import json

    frame = json.loads(json.dumps(m.encode(message)))  # as the transport carries it
    assert m.decode(frame, frozenset({message.kind})) == message


def _spawn_frame(**body_changes):
    frame = m.encode(m.Spawn(job="j", nonce="n", device="cpu", extra_binds=(("/a", "/b"),)))
    return {**frame, "body": {**frame["body"], **body_changes}}


BAD = {
    "an old op dict": {"op": "spawn", "job": "j", "nonce": "n", "device": "cpu"},
    "another version": {**m.encode(m.Wait(pid=1)), "v": [2, 0]},
    "a kind not expected here": m.encode(m.Hello(sandbox="none", reason="", pid=1)),
    "an unknown kind": {**m.encode(m.Wait(pid=1)), "kind": "exec"},
    "a list as the kind": {**m.encode(m.Wait(pid=1)), "kind": ["wait"]},
    "an unknown field": _spawn_frame(command="sh"),
    "a missing field": {**m.encode(m.Wait(pid=1)), "body": {}},
    "a string pid": {**m.encode(m.Wait(pid=1)), "body": {"pid": "1"}},
    "a bool pid": {**m.encode(m.Wait(pid=1)), "body": {"pid": True}},
    "a bind of three paths": _spawn_frame(extra_binds=[["/a", "/b", "/c"]]),
    "a bind that is not paths": _spawn_frame(writable_binds=[[1, 2]]),
    "a body that is a list": {**m.encode(m.Wait(pid=1)), "body": [1]},
}


@pytest.mark.parametrize("name", list(BAD))
def test_anything_else_is_a_protocol_error(name):
    with pytest.raises(m.ProtocolError):
        m.decode(BAD[name], m.JUDGE_KINDS)


def test_a_real_fork_server_refuses_what_it_cannot_read_and_keeps_serving():
    server = ForkServer("cpu")
    try:
        for frame in (BAD["an old op dict"], BAD["a string pid"], m.encode(m.Spawn(job="j", nonce="n",
                                                                                   device="cpu"))):
            server.channel.send(frame)  # the last is a Spawn without its two descriptors
            reply, _ = server.channel.recv(time.monotonic() + 30)
            refused = m.decode(reply, frozenset({"refused"}))
            assert isinstance(refused, m.Refused) and refused.reason
        with pytest.raises(RuntimeError, match="refused"):
            server.call(m.Spawn(job="j", nonce="n", device="cpu"), "spawned")
        status = server.call(m.Wait(pid=999_999_999), "status", timeout=30)
        assert isinstance(status, m.Status) and status.status == -1
        with RunnerProcess.start(server, "cpu") as runner:  # still serving
            assert runner.ready is not None and runner.ready.sandbox
    finally:
        server.close()
