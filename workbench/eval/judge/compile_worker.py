"""A process of the judge's own that compiles the reference ahead of it, so the judge's `torch.compile` of the
reference finds Inductor's on-disk caches warm (its graph, its Triton kernels, their autotuning) and takes a fraction
of a second instead of one or two.

Why: the judge compiles the reference in a background thread while the candidate is imported and checked
(`reference_compile.py`), and on a GPU with cold caches that compile (1.3-2.1 s for KernelBench L1/40 and L2/1 on an
H100) outlasted the load and the check, so the timing waited for it (0.4 s on both). In the judge it shares one
interpreter lock with the main thread, which answers the runners and makes the correctness rounds: each slows the
other. Here it has an interpreter to itself, and the judge's thread only waits on a pipe.

Trust: only the task's reference runs here, as in the judge (the task is the judge's), on inputs drawn here; nothing
of a candidate reaches this process, and what it leaves is Inductor's cache, which the judge's own compile reads as
it would have written it. The judge's compile still runs and its result is the one timed: this process only warms.

Device: the judge's compile thread waits for the reply while it holds the device lock shared, so this process's
first call on the GPU is covered as the thread's own was; it draws its own inputs (an input set at the timing size)
only where the judge would compile beside its check (`reference_compile.fits_beside`).

Protocol: the worker prints "ready" once its imports are done, then reads one JSON job a line ({"task": spec,
"size": {...}, "seed": n, "device": "cuda:0"}) and answers one JSON line ({"ok": bool, "note": str, "seconds": s}).
`KWB_COMPILE_WORKER=0` turns it off.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

#: Seconds a job may take before the judge gives the worker up (and compiles on its own, as before).
JOB_TIMEOUT_S = 300.0


def wanted() -> bool:
    return os.environ.get("KWB_COMPILE_WORKER", "").strip() != "0"


class CompileWorker:
    """The judge's side: starts the worker, tells whether it is up, and runs one job at a time."""

    def __init__(self, device: str = "cpu", lock_folder: str = "") -> None:
        from workbench.eval.wire.process_env import module_command

        args = (str(os.getpid()), device, lock_folder)
        self.proc = subprocess.Popen(module_command("workbench.eval.judge.compile_worker", *args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=sys.stderr.fileno(), text=True, bufsize=1)
        self.up = False
        self.busy = False

    def ready(self) -> bool:
        """Whether the worker said "ready" (read without waiting); False for good once it died."""
        if self.up:
            return self.proc.poll() is None
        if self.proc.poll() is not None or self.proc.stdout is None:
            return False
        if select.select([self.proc.stdout], [], [], 0)[0]:
            self.up = self.proc.stdout.readline().strip() == "ready"
        return self.up

    def compile(self, task_spec: dict[str, Any], size: dict[str, Any], seed: int, device: str,
                timeout: float = JOB_TIMEOUT_S) -> dict[str, Any]:
        """Run one job; its reply, or {"ok": False, "note": why} (the worker is closed when it did not answer)."""
        if not self.ready() or self.busy or self.proc.stdin is None or self.proc.stdout is None:
            return {"ok": False, "note": "the compile worker is not ready"}
        self.busy = True
        try:
            self.proc.stdin.write(json.dumps({"task": task_spec, "size": size, "seed": seed, "device": device}) + "\n")
            self.proc.stdin.flush()
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                self.close()
                return {"ok": False, "note": f"the compile worker did not answer within {timeout:g} s"}
            line = self.proc.stdout.readline()
            return json.loads(line) if line else {"ok": False, "note": "the compile worker ended"}
        except (OSError, ValueError) as exc:
            self.close()
            return {"ok": False, "note": f"the compile worker failed: {type(exc).__name__}: {exc}"}
        finally:
            self.busy = False

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _job(job: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Build the reference as the judge does (`build_reference`, its inputs as `Evaluation._sample_inputs` draws
    them) and compile it under the task's precision policy (`reference_compile.compile_reference`)."""
    import torch

    from workbench.eval.judge.reference_compile import compile_reference
    from workbench.eval.judge.reference_rounds import build_reference
    from workbench.tasks import precision
    from workbench.tasks.task import LoadedReference, Task

    started = time.perf_counter()
    device = job["device"]
    try:
        task = Task.from_spec(job["task"])
        ref = LoadedReference(task, workdir)
        with precision.applied(task.precision, device):
            model = build_reference(ref, job["size"], device, int(job["seed"]))
            inputs = ref.make_inputs(job["size"], int(job["seed"]) + 101, device)
            fn, note = compile_reference(model, inputs)
        del model, inputs, fn
        return {"ok": not note, "note": note, "seconds": round(time.perf_counter() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - the judge compiles on its own and reports what fails there
        return {"ok": False, "note": f"{type(exc).__name__}: {str(exc)[:300]}",
                "seconds": round(time.perf_counter() - started, 3)}
    finally:
        torch._dynamo.reset()  # nothing of the reference stays alive here: the judge keeps the compiled one
        if device.startswith("cuda") and torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # the judge's checks need the memory more than this process does


def ahead_for(ev: Any) -> Callable[[], dict[str, Any]] | None:
    """For the evaluation `ev`'s background compile: a call that has the judge's worker compile the reference first
    (started on the first use; None while it starts, when it is off or gone: the judge compiles on its own)."""
    if not wanted() or not ev.device.startswith("cuda"):
        return None
    worker = getattr(ev.ctx, "compile_worker", None)
    if worker is None:
        lock = getattr(ev.ctx, "device_lock", None)
        try:
            ev.ctx.compile_worker = CompileWorker(ev.device, lock.folder if lock is not None else "")
        except OSError:
            pass
        return None
    if not worker.ready():
        return None
    spec, size, seed, device = ev.job["task"], dict(ev.time_size), ev.seed, ev.device
    return lambda: worker.compile(spec, size, seed, device)


def release(ctx: Any) -> None:
    """Close the judge's worker, if it runs (its CUDA context holds half a GiB): for a task that fills the device.
    The next task that compiles beside its check starts it again."""
    worker = getattr(ctx, "compile_worker", None)
    if worker is not None:
        worker.close()
        ctx.compile_worker = None


def _warm_up(device: str, lock_folder: str) -> None:
    """One small compile before the worker says ready: a process's first compile pays the CUDA context and
    Inductor's own start (its passes, its imports), 3.6 s for a first job on an H100 against 0.7 s for the next.
    On a GPU it holds the device lock shared, as every compile beside the judges' timings does."""
    import torch

    from workbench.eval.judge.device_lock import SHARED, DeviceLock

    if not device.startswith("cuda") or not lock_folder:
        return
    torch.cuda.set_device(torch.device(device))
    with DeviceLock(device, lock_folder).hold(SHARED), torch.no_grad():
        lin, norm = torch.nn.Linear(64, 64).to(device), torch.nn.LayerNorm(64).to(device)
        conv = torch.nn.Conv2d(4, 4, 3).to(device)
        fn = torch.compile(lambda x, img: torch.softmax(norm(torch.relu(lin(x))), -1).sum() + conv(img).mean())
        fn(torch.randn(32, 64, device=device), torch.randn(2, 4, 16, 16, device=device))
        torch.cuda.synchronize()
    torch._dynamo.reset()
    torch.cuda.empty_cache()


def main() -> None:
    from workbench.eval.runner.sandbox import die_with_parent

    die_with_parent(int(sys.argv[1]) if len(sys.argv) > 1 else None)  # the judge that started it
    replies = os.fdopen(os.dup(1), "w")  # the reference's prints go to stderr, never into a reply
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    try:
        _warm_up(sys.argv[2] if len(sys.argv) > 2 else "cpu", sys.argv[3] if len(sys.argv) > 3 else "")
    except Exception as exc:  # noqa: BLE001 - never ready: the judge compiles on its own, as before
        print(f"compile worker: warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    workdir = tempfile.mkdtemp(prefix="kwb_compile_worker_")
    replies.write("ready\n")
    replies.flush()
    for line in sys.stdin:
        if line.strip():
            replies.write(json.dumps(_job(json.loads(line), workdir)) + "\n")
            replies.flush()


if __name__ == "__main__":
    main()
