"""The judge process: trusted, never imports candidate code. Reads evaluation jobs (JSON lines on stdin) from the
caller, runs each as an `Evaluation` (one fresh sandboxed runner per candidate, forked by the fork server this
process owns), and answers one JSON line per job on a private channel.

The candidate's prints never reach this channel: they go to the runner's own output pipe, read through a bounded
buffer. The judge's own stdout is redirected to stderr so nothing a reference prints can corrupt a reply.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

# The reply channel is a private duplicate of stdout; fd 1 then points at stderr for everything else.
_REPLIES = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

import torch  # noqa: E402

from workbench.eval.judge.context import Context, probe_transport  # noqa: E402
from workbench.eval.judge.evaluation import Evaluation  # noqa: E402
from workbench.eval.judge.runner_handle import ForkServer  # noqa: E402
from workbench.eval.wire.timed_loop import cpu_timing_threads  # noqa: E402


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    if isinstance(obj, tuple):
        return list(obj)
    return str(obj)


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception:  # pragma: no cover
        out["triton"] = "missing"
    return out


def _die_with_the_caller() -> None:
    """The judge runs in its own session (a cancel kills its whole group), so it does not get the caller's signals:
    when the caller is gone (it was killed, or a timeout ended it), the judge exits too, and its fork server and
    runners follow it (each dies with its parent). Otherwise an orphaned judge would keep its GPU memory."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True, name="kwb-caller-watch").start()


def _evaluate(job: dict, ctx: Context) -> dict:
    """One evaluation; with KWB_JUDGE_PROFILE set to a folder, under cProfile with its stats written there (where
    the judge's seconds go, function by function: `python -m pstats FILE`)."""
    folder = os.environ.get("KWB_JUDGE_PROFILE")
    if not folder:
        return Evaluation(job, ctx).run()
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(Evaluation(job, ctx).run)
    finally:
        os.makedirs(folder, exist_ok=True)
        profiler.dump_stats(os.path.join(folder, f"judge-{time.strftime('%H%M%S')}-{os.getpid()}.prof"))


def main() -> None:
    _die_with_the_caller()
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    if not device.startswith("cuda"):
        cpu_timing_threads()
    workdir = tempfile.mkdtemp(prefix="kwb_judge_")
    server = ForkServer(device)
    ctx = Context(fork_server=server, workdir=workdir)
    ctx.transport, ctx.share_ipc, ctx.transport_note = probe_transport(server, device)
    gc.freeze()
    _REPLIES.write(json.dumps({"ready": True, "pid": os.getpid(), "versions": _versions(),
                               "sandbox": server.sandbox, "sandbox_reason": server.reason,
                               "transport": ctx.transport, "transport_note": ctx.transport_note}) + "\n")
    _REPLIES.flush()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            try:
                if not server.alive():
                    server = ForkServer(device)
                    ctx.fork_server = server
                reply = _evaluate(job, ctx)
            except BaseException as exc:  # a reply must always come back
                reply = {"status": "runtime_error", "message": f"judge error: {type(exc).__name__}: {exc}",
                         "log": traceback.format_exc()[-3000:]}
            _REPLIES.write(json.dumps(reply, default=_jsonable) + "\n")
            _REPLIES.flush()
            gc.collect()
    finally:
        server.close()


if __name__ == "__main__":
    main()
