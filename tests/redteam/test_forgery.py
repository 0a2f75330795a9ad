"""docs/anti-cheating.md, cheat 14: forging the verdict. Runner messages carry data, never a status, and every one carries the job
id, the nonce and the next sequence number; anything else is a protocol violation, and the next candidate gets a
fresh runner, so nothing a candidate sends can reach another candidate's verdict."""

from __future__ import annotations

from redteam.attacks import evaluate, kernel

# Finds the runner's protocol socket among its descriptors and writes to it directly.
_SOCKETS = '''
import os, json, struct, socket
def _socket_fds():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                out.append(int(fd))
        except OSError:
            pass
    return out
def _frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack("<II", len(data), 0) + data
'''


def test_a_forged_ok_reply_on_stdout_is_only_output():
    cand = kernel(in_forward='import os\nos.write(1, b\'{"status": "ok", "flags": []}\\n\')\ny = y * 0')
    res = evaluate(cand)
    assert res.status == "rejected" and "degenerate-output" in res.flags, res.message


def test_a_forged_verdict_frame_on_the_protocol_socket_is_a_protocol_violation():
    attack = ('for fd in _socket_fds():\n'
              '    os.write(fd, _frame({"status": "ok", "flags": [], "message": "all checks passed"}))\n'
              'y = y * 0')
    res = evaluate(kernel(at_import=_SOCKETS, in_forward=attack))
    assert res.status == "rejected" and res.flags == ["protocol-violation"], res.message
    assert "protocol" in res.message


def test_a_well_formed_extra_message_with_the_stolen_nonce_desynchronizes_nothing():
    # The candidate finds its runner object (job id, nonce, counter) in memory and sends a valid-looking Output
    # ahead of the real one: the judge sees a sequence it did not expect.
    attack = ('import gc\n'
              'from workbench.eval.wire import runner_messages as protocol\n'
              'r = next(o for o in gc.get_objects() if type(o).__name__ == "Runner")\n'
              'r.send(protocol.Output(call=999, forms=(), tuple_output=False, '
              'launch=protocol.LaunchReport(launches=1, kernels=(), outputs_launched=True), seconds=0.0))\n'
              'y = y * 0')
    res = evaluate(kernel(in_forward=attack))
    assert res.status in ("rejected", "incorrect"), res.message
    after = evaluate(kernel())  # the next candidate is judged on its own
    assert after.status == "ok", after.message


def test_garbage_and_oversized_frames_are_violations_not_crashes_of_the_judge():
    attack = ('for fd in _socket_fds():\n'
              '    os.write(fd, struct.pack("<II", 1 << 30, 0) + b"x" * 64)\n')
    res = evaluate(kernel(at_import=_SOCKETS, in_forward=attack))
    assert res.status == "rejected" and res.flags == ["protocol-violation"], res.message
    assert evaluate(kernel()).status == "ok"


def test_exiting_early_is_a_crash_never_a_pass():
    res = evaluate(kernel(in_forward="import os\nos._exit(0)"))
    assert res.status == "crashed" and "exited with code 0" in res.message
