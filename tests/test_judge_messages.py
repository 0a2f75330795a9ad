"""The caller/judge channel: every message round-trips exactly, and anything else on the line is refused by name."""

from __future__ import annotations

import json
import math

import pytest
import torch

from workbench.eval.judge.progress import ProgressHook
from workbench.eval.judge.verdict import reply as reply_from_evaluation
from workbench.eval.wire import judge_messages as wire
from workbench.eval.wire.records import RecordError, from_json
from workbench.result import Timing

JOB = wire.Job(task={"name": "softmax", "sizes": {"cpu": {"dim": 64}}}, candidate=wire.CandidateSpec(source="x", language="torch"),
               device="cpu", size={"dim": 64, "dtype": "float32"}, check_sizes=({"dim": 64}, {"dim": 33}),
               timeout=5.0, compile_timeout=60.0, memory_bytes=2**33, seed=3, rounds=6, progress=True)
TIMING = Timing(median_ms=1.5, min_ms=1.0, max_ms=2.0, iqr_ms=0.2, ci95_low_ms=1.4, ci95_high_ms=1.6, n=30,
                clock="wall", samples_ms=[1.0, 1.5, 2.0], stop_reason="ci-target")


def _frame(message, job="j1") -> dict:
    return json.loads(wire.encode_line(message, job))


def _line(frame: dict) -> bytes:
    return json.dumps(frame).encode()


def test_job_reply_progress_and_ready_round_trip_exactly():
    reply = wire.Reply(status="ok", flags=("a",), timing=TIMING, speedup_ci=(0.9, 1.2), max_abs_err=float("nan"),
                       stage_seconds={"check": 1.25}, counted={"flops": 10, "bytes": None}, judge_pid=42)
    progress = wire.Progress(stage="time", elapsed=2.5, step=3, steps=8, samples=120, ci_width=0.04)
    ready = wire.Ready(pid=7, versions={"torch": "2.4"}, sandbox="namespaces")
    for message, allowed in ((JOB, "job"), (reply, "reply"), (progress, "progress"), (ready, "ready")):
        back = wire.decode_line(wire.encode_line(message, "j1"), job="j1", allowed=frozenset({allowed}))
        if message is reply:  # NaN != NaN: compare the rest, and that it is still NaN
            assert math.isnan(back.max_abs_err) and back.timing == TIMING and back.speedup_ci == (0.9, 1.2)
            assert back == wire.Reply(**{**reply.__dict__, "max_abs_err": back.max_abs_err})
        else:
            assert back == message
    assert wire.decode_job(wire.encode_line(JOB, "abc")) == ("abc", JOB)


@pytest.mark.parametrize("edit, error", [
    (lambda f: f["body"].update(rounds=True), "Job.rounds: expected int, got bool"),
    (lambda f: f["body"].update(timeout="5"), "Job.timeout: expected float, got str"),
    (lambda f: f["body"].update(colour="red"), "unknown field(s) 'colour'"),
    (lambda f: f["body"].pop("device"), "missing field 'device'"),
    (lambda f: f["body"].update(check_sizes={"dim": 64}), "Job.check_sizes: expected a list"),
    (lambda f: f["body"].update(check_sizes=[{"dim": 64}, 3]), "Job.check_sizes[1]: expected an object"),
    (lambda f: f["body"].update(memory_bytes=1.5), "Job.memory_bytes: expected int, got float"),
    (lambda f: f.update(v=[3, 0]), "channel version [3, 0], expected [2, 0]"),
    (lambda f: f.update(kind="reply"), "unexpected message kind 'reply'"),
    (lambda f: f.update(extra=1), "not a channel frame"),
    (lambda f: f.update(job=5), "not a channel frame"),
])
def test_a_job_that_is_not_exactly_a_job_is_refused_naming_the_field(edit, error):
    frame = _frame(JOB)
    edit(frame)
    with pytest.raises(wire.ChannelError) as info:
        wire.decode_job(_line(frame))
    assert error in str(info.value)


def test_a_reply_for_another_job_a_nested_timing_gone_wrong_and_garbage_are_refused():
    reply = wire.Reply(status="ok", timing=TIMING)
    with pytest.raises(wire.ChannelError, match="message for job 'j1' while job 'j2' is running"):
        wire.decode_line(wire.encode_line(reply, "j1"), job="j2", allowed=frozenset({"reply"}))
    frame = _frame(reply)
    frame["body"]["timing"]["n"] = "thirty"
    with pytest.raises(wire.ChannelError, match=r"Reply.timing.n: expected int, got str"):
        wire.decode_line(_line(frame), job="j1", allowed=frozenset({"reply"}))
    frame = _frame(reply)
    frame["body"]["speedup_ci"] = [1.0, 2.0, 3.0]
    with pytest.raises(wire.ChannelError, match="speedup_ci"):
        wire.decode_line(_line(frame), job="j1", allowed=frozenset({"reply"}))
    with pytest.raises(wire.ChannelError, match="not a JSON line"):
        wire.decode_line(b"hello from a print()", job="j1", allowed=frozenset({"reply"}))


def test_the_evaluation_dict_becomes_a_reply_and_an_undeclared_key_is_an_error():
    data = {"status": "ok", "flags": [], "warnings": ["interpreter-bf16"], "timing": TIMING.to_dict(),
            "speedup_ci": [0.8, 1.1], "details": {"dtype": torch.float16, "shape": (2, 3)}, "versions": {"torch": "x"}}
    reply = reply_from_evaluation(data)
    assert reply.timing == TIMING and reply.speedup_ci == (0.8, 1.1) and reply.warnings == ("interpreter-bf16",)
    assert reply.details == {"dtype": "float16", "shape": [2, 3]}
    with pytest.raises(RecordError, match="unknown field.*'timing_protocol'"):
        reply_from_evaluation({**data, "timing_protocol": {}})


def test_records_check_unions_and_rebuild_optional_records():
    assert from_json(wire.Reply, {"status": "ok", "timing": None}).timing is None
    assert from_json(wire.Reply, {"status": "ok", "coverage": 1}).coverage == 1.0
    with pytest.raises(RecordError, match="Reply.coverage"):
        from_json(wire.Reply, {"status": "ok", "coverage": "most"})
    with pytest.raises(RecordError, match=r"Reply.stage_seconds\['check'\]: expected float, got NoneType"):
        from_json(wire.Reply, {"status": "ok", "stage_seconds": {"check": None}})


def test_progress_describes_itself_in_one_line():
    assert wire.Progress(stage="check", elapsed=3.21, step=2, steps=6).describe() == "check · round 2 of 6 · 3.2 s"
    line = wire.Progress(stage="time", elapsed=12.0, step=3, steps=8, samples=412, ci_width=0.082).describe()
    assert line == "time · batch 3 of 8 · 412 samples · CI ±4.1% · 12.0 s"
    assert wire.Progress(stage="load", elapsed=0.5).describe() == "load · 0.5 s"


def test_the_judges_progress_hook_sends_stage_changes_at_once_and_throttles_the_rest():
    sent: list[wire.Progress] = []
    hook = ProgressHook(min_interval=60.0)
    hook("scan")  # not started: nothing to send, and no error
    hook.start(sent.append)
    hook("load")
    hook("load", note="again")  # same stage within the interval: dropped
    hook("check", step=1, steps=6)
    hook("check", step=2, steps=6)  # dropped
    hook("time", step=1, steps=4, samples=10, ci_width=0.5)
    hook("time", colour="red")  # a field Progress lacks: dropped by the throttle, never raised
    assert [(p.stage, p.step, p.steps) for p in sent] == [("load", 0, 0), ("check", 1, 6), ("time", 1, 4)]
    assert all(0 <= a.elapsed <= b.elapsed for a, b in zip(sent, sent[1:], strict=False))
    hook.stop()
    hook("cover")
    assert len(sent) == 3
    hook.start(sent.append)
    hook("scan", colour="red")
    assert sent[-1].stage == "scan" and "bad progress call" in sent[-1].note
