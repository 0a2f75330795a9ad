"""Candidates per minute of the LLM loop: the strictly serial loop against the concurrent one, in one run.

    python benchmarks/llm_throughput.py --candidates 8                  # CPU (Triton interpreter), ~2 minutes
    python benchmarks/llm_throughput.py --device cuda                   # one GPU, 24 candidates per loop

The model is the local protocol server of the test suite (tests/llm_server.py) answering every request after
`--latency` seconds (5 by default: a hosted model writing a kernel), through the real `openai` SDK (a plain
HTTP client when the SDK is not installed). Each reply is a distinct honest kernel for the built-in task
`vector_add` at the device's size preset, carrying this run's nonce, so every candidate is judged by
`workbench.evaluate` in full (correctness rounds, checks, timing) and none is a cache hit or a repeat.

Three loops of `--candidates` candidates each, after one warm-up evaluation (the judge's start):
  serial      refine, one candidate at a time: ask, wait, judge, then ask again (concurrency=1)
  refine xN   refine, `--samples` drafts per round in flight at once, judged as they arrive
  best-of-n   `--samples` calls in flight, a new one sent whenever a candidate is recorded

Prints candidates/minute for each and the ratio to the serial loop. Targets: on CPU the concurrent loop at
least 4x the serial one; on one GPU (H100) at least 30 candidates/minute. Exit code 1 when the device's
target is missed.
"""

from __future__ import annotations

import argparse
import collections
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the protocol server lives with the tests

from llm_server import ScriptedLLMServer, reply  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.llm.agent import AgentSettings, run_agent  # noqa: E402
from workbench.llm.base import BaseProvider, LLMReply, LLMRequest  # noqa: E402
from workbench.llm.recording import Recorder  # noqa: E402

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
#: Marks this run's kernels: a compile cache from an earlier run never answers for them.
NONCE = secrets.token_hex(4)


def kernel(variant: int) -> str:
    """An honest vector-add kernel; `variant` changes its block size and name, so no two sources are equal
    (blocks of 2048+ keep the interpreter's program count, and so the CPU evaluation, small)."""
    block = (2048, 4096, 8192)[variant % 3]
    return HEAD + f'''# llm_throughput run {NONCE}
BLOCK = {block}


@triton.jit
def add_kernel_{variant}(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel_{variant}[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
        return out
'''


class PlainHTTPProvider(BaseProvider):
    """OpenAI-protocol calls with the standard library, for machines without the `openai` SDK."""

    name = "openai"
    accepts_seed = True

    def __init__(self, model: str, base_url: str, **kw):
        super().__init__(model, endpoint=base_url, **kw)
        self.base_url = base_url

    def _send(self, request: LLMRequest) -> LLMReply:
        import json
        import urllib.request

        body = {"model": request.model, "messages": list(request.messages), "max_tokens": request.max_tokens,
                "seed": request.sample}
        call = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(call, timeout=120) as response:
            data = json.loads(response.read())
        choice = data["choices"][0]
        return LLMReply(text=choice["message"]["content"], tokens_in=data["usage"]["prompt_tokens"],
                        tokens_out=data["usage"]["completion_tokens"], finish_reason=choice["finish_reason"])


def provider_for(server: ScriptedLLMServer) -> BaseProvider:
    try:
        from workbench.llm.openai_provider import OpenAIProvider

        return OpenAIProvider("simulated-coder", base_url=server.openai_base_url, api_key="local", max_retries=0,
                              recorder=Recorder())
    except Exception:  # the SDK is an optional dependency
        return PlainHTTPProvider("simulated-coder", server.openai_base_url, recorder=Recorder())


def measure(label: str, strategy: str, settings: AgentSettings, latency: float, seed: int) -> dict:
    # Seeds differ per loop (each sample's seed picks its reply), so no loop meets another's kernels.
    replies = {seed * 1000 + i: reply(kernel(seed * 1000 + i)) for i in range(settings.max_turns)}
    with ScriptedLLMServer(router=lambda r: replies.get(r.body.get("seed")), delay_s=latency) as server:
        started = time.monotonic()
        run = run_agent("vector_add", provider_for(server), strategy, settings.replace(seed=seed), progress=False)
        wall = time.monotonic() - started
        in_flight = server.in_flight_max
    evals = [n.result.metadata.get("eval_seconds") for n in run.nodes if n.result is not None]
    statuses = dict(collections.Counter(n.status for n in run.nodes))
    flags = collections.Counter(f for n in run.nodes if n.status != "ok" for f in n.flags)
    return {"label": label, "candidates": len(run.nodes), "seconds": wall, "per_min": 60 * len(run.nodes) / wall,
            "eval_median_s": statistics.median([e for e in evals if e]) if any(evals) else float("nan"),
            "in_flight": in_flight, "statuses": statuses, "flags": dict(flags)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--latency", type=float, default=5.0, help="seconds the simulated model takes per reply")
    parser.add_argument("--samples", type=int, default=8, help="samples per round (calls in flight)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="candidates per loop (default: 8 on the CPU, 24 on a GPU)")
    parser.add_argument("--no-time", action="store_true", help="judge correctness only (no timing)")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("llm_throughput: --device cuda needs a CUDA GPU; none is visible. Nothing measured.")
            return 2
    if args.candidates is None:
        args.candidates = 8 if args.device == "cpu" else 24
    if args.candidates < 1 or args.samples < 1 or args.latency < 0:
        parser.error("--candidates and --samples must be at least 1, --latency at least 0")
    base = AgentSettings(max_turns=args.candidates, n=args.candidates, device=args.device,
                         time_it=not args.no_time, max_failed_steps=None)
    started = time.monotonic()
    warm = wb.evaluate("vector_add", wb.Candidate(source=kernel(99), language="triton"), args.device,
                       time_it=not args.no_time)
    print(f"warm-up evaluation: {warm.status} in {time.monotonic() - started:.1f} s; model latency {args.latency:g} s, "
          f"{args.samples} samples per round, {args.candidates} candidates per loop, device {args.device}", flush=True)
    loops = [
        ("serial", "refine", base.replace(concurrency=1, samples_per_round=1)),
        (f"refine x{args.samples}", "refine", base.replace(concurrency=args.samples, samples_per_round=args.samples)),
        ("best-of-n", "best-of-n", base.replace(concurrency=args.samples)),
    ]
    rows = []
    for seed, (label, strategy, settings) in enumerate(loops, start=1):
        rows.append(measure(label, strategy, settings, args.latency, seed))
        print(f"  {label}: {rows[-1]['candidates']} candidates in {rows[-1]['seconds']:.1f} s", flush=True)
    serial = rows[0]["per_min"]
    print(f"\n{'loop':<12} {'cand':>5} {'seconds':>8} {'cand/min':>9} {'x serial':>9} {'eval med s':>11} "
          f"{'in flight':>10}  statuses")
    for row in rows:
        print(f"{row['label']:<12} {row['candidates']:>5} {row['seconds']:>8.1f} {row['per_min']:>9.1f} "
              f"{row['per_min'] / serial:>9.2f} {row['eval_median_s']:>11.2f} {row['in_flight']:>10}  "
              f"{row['statuses']}")
    flagged = collections.Counter()
    for row in rows:
        flagged.update(row["flags"])
    if flagged:
        print(f"\nnote: every kernel is honest, yet some were not judged ok ({dict(flagged)}): the evaluation's "
              "verdicts, counted as candidates all the same")
    best = max(rows[1:], key=lambda r: r["per_min"])
    if args.device == "cpu":
        ratio = best["per_min"] / serial
        ok = ratio >= 4.0
        print(f"\ntarget (CPU): concurrent >= 4x serial -> {best['label']} {ratio:.2f}x: {'met' if ok else 'MISSED'}")
    else:
        ok = best["per_min"] >= 30.0
        print(f"\ntarget (GPU): >= 30 candidates/min -> {best['label']} {best['per_min']:.1f}/min: "
              f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
