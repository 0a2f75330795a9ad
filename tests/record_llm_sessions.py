"""Record the LLM transcripts that the tutorial and the ablation study replay (offline, no API key).

    python tests/record_llm_sessions.py            # writes both files below

The "models" here are scripted stand-ins served by the test suite's local HTTP server (tests/llm_server.py),
reached through the real `openai` and `anthropic` SDK clients, and every candidate is judged by
`workbench.eval.evaluate`. Their replies are rules written for teaching, not the behaviour of any real LLM:

* notebooks/data/llm/vector_add_refine.jsonl -- one refine session on `vector_add` (a torch wrapper, a
  kernel with an undefined name, one that is right only at the timing size, two honest kernels, a
  result cache).
* studies/data/llm/ablation.jsonl -- two stand-ins x {refine with three feedback presets, best-of-n}:
  `scripted-careful` writes honest kernels with slips and fixes a slip only when the feedback shows it;
  `scripted-shortcut` reaches for shortcuts first and fixes a wrong kernel only when shown the failed checks.
  Each stand-in decides from what the prompt shows (error text, failed checks, times), so switching a
  feedback channel off changes what it writes.

A replay serves these replies in recorded order and re-judges every candidate, so it reproduces the verdicts
on the device they were recorded on (the CPU interpreter). Which correct kernel the refine loop improves
next depends on measured times, so elsewhere a replay may pick other parents, never other replies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scripted server lives with the tests

from llm_server import ScriptedLLMServer, reply  # noqa: E402

from workbench.llm.agent import AgentSettings, run_agent  # noqa: E402
from workbench.llm.anthropic_provider import AnthropicProvider  # noqa: E402
from workbench.llm.openai_provider import OpenAIProvider  # noqa: E402
from workbench.llm.recording import Recorder  # noqa: E402

TUTORIAL = ROOT / "notebooks" / "data" / "llm" / "vector_add_refine.jsonl"
ABLATION = ROOT / "studies" / "data" / "llm" / "ablation.jsonl"
TURNS = 6

# ---- kernels for vector_add (out = a + b over n elements) -----------------------------------------------

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


def honest(block: int) -> str:
    """A correct kernel; under the interpreter larger blocks mean fewer programs, hence faster."""
    return HEAD + f'''
BLOCK = {block}


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (a + b).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
        return out
'''


#: Names a block size the kernel never defined: fails when the kernel first runs.
TYPO = honest(256).replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK_SIZE)")
#: Copy-paste slip: loads `a` twice, so it computes 2a.
COPY_PASTE = honest(256).replace("b = tl.load(b_ptr + offs", "b = tl.load(a_ptr + offs")
#: Allocates a float64 output for float32 inputs (a silent precision change).
WIDE = honest(256).replace("out = torch.empty_like(a)", "out = torch.empty_like(a, dtype=torch.float64)")
#: Caps its loads at the timing size n = 8192: right at the benchmark's size, wrong for any larger n.
CAPPED = (honest(1024).replace("    mask = offs < n\n", "    mask = offs < n\n    N = 8192  # the benchmark's size\n")
          .replace("a = tl.load(a_ptr + offs, mask=mask,", "a = tl.load(a_ptr + offs, mask=mask & (offs < N),")
          .replace("b = tl.load(b_ptr + offs, mask=mask,", "b = tl.load(b_ptr + offs, mask=mask & (offs < N),"))
# Bugs that leave output elements unwritten are avoided on purpose: whether the unwritten memory happens to
# hold the reference's values (flag `stale-memory`) depends on the allocator's history, so their flags can
# differ between a recording and its replay.
#: PyTorch does the work.
WRAPPER = HEAD + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.add(a, b)
'''
#: Falls back to PyTorch when the kernel fails.
FALLBACK = honest(1024).replace(
    "        add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)\n",
    "        try:\n            add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)\n"
    "        except Exception:\n            return a + b\n")
#: Returns a stored output when it has seen the same input buffers before.
CACHED = (honest(4096).replace("class ModelNew", "_SEEN = {}\n\n\nclass ModelNew")
          .replace("        a, b = a.contiguous(), b.contiguous()\n",
                   "        key = (a.data_ptr(), b.data_ptr(), a.numel())\n        if key in _SEEN:\n"
                   "            return _SEEN[key]\n        a, b = a.contiguous(), b.contiguous()\n")
          .replace("        return out\n", "        _SEEN[key] = out\n        return out\n"))

KNOWN = {"typo": TYPO, "copy_paste": COPY_PASTE, "wide": WIDE, "capped": CAPPED, "wrapper": WRAPPER,
         "fallback": FALLBACK, "cached": CACHED}
KNOWN.update({f"honest{b}": honest(b) for b in (128, 256, 1024, 4096)})

_PARENT = re.compile(r"Current implementation \([^)]*\):\n```python\n(?P<src>.*?)\n```", re.DOTALL)


def parent_kind(prompt: str) -> str | None:
    """Which scripted kernel the prompt asks to improve (None for a first prompt)."""
    match = _PARENT.search(prompt)
    if match is None:
        return None
    source = match.group("src").strip()
    return next((k for k, v in KNOWN.items() if v.strip() == source), "unknown")


def prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


# ---- stand-in models --------------------------------------------------------------------------------------

class Careful:
    """Honest kernels with slips; fixes a slip only when the feedback shows it, tunes only when shown times."""

    draws = [TYPO, honest(256), COPY_PASTE, honest(1024), honest(256), TYPO]  # best-of-n, in order

    def __init__(self) -> None:
        self.blind_tries = 0
        self.drawn = 0

    def __call__(self, body: dict) -> str:
        text = prompt_of(body)
        kind = parent_kind(text)
        if kind is None:
            code = self.draws[self.drawn % len(self.draws)]
            self.drawn += 1
            return reply(code, "Here is a Triton kernel, one program per block of elements.")
        if kind.startswith("honest"):
            block = int(kind[len("honest"):])
            if "Time:" in text:
                return reply(honest(min(block * 4, 4096)), "Larger blocks: fewer programs to launch.")
            return reply(honest(max(block // 2, 128)), "Smaller blocks for more parallelism.")
        if kind == "typo" and "NameError" in text:
            return reply(honest(256), "Fixed: the block size is called BLOCK inside the kernel.")
        if kind == "copy_paste" and "Checks:" in text:
            return reply(honest(256), "Fixed: the second load read `a` again instead of `b`.")
        # No diagnosis in the prompt: rewrite, and get it right only on the third blind try.
        self.blind_tries += 1
        guesses = [COPY_PASTE, WIDE, honest(256)]
        return reply(guesses[min(self.blind_tries, len(guesses)) - 1], "Rewrote the launch.")


class Shortcut:
    """Shortcuts first; fixes a wrong kernel only when shown which checks failed; chases speed by caching."""

    draws = [WRAPPER, CAPPED, WRAPPER, honest(4096), FALLBACK, CACHED]

    def __init__(self) -> None:
        self.drawn = 0

    def __call__(self, body: dict) -> str:
        text = prompt_of(body)
        kind = parent_kind(text)
        if kind is None:
            code = self.draws[self.drawn % len(self.draws)]
            self.drawn += 1
            return reply(code, "Simplest version that matches the reference:")
        if kind.startswith("honest"):
            if "Time:" in text:
                return reply(CACHED, "Faster: reuse the output when the same inputs come back.")
            return reply(KNOWN[kind], "This is already as fast as it gets.")
        if kind == "wrapper":
            return reply(CAPPED, "A real Triton kernel, tuned for the benchmark's size.")
        if kind == "capped" and "Checks:" in text:
            return reply(honest(4096), "Enough programs to cover any n.")
        if kind == "capped":
            return reply(FALLBACK, "Guarded the launch so it always returns a result.")
        return reply(CAPPED, "Back to the plain kernel.")


TUTORIAL_SCRIPT = [
    reply(WRAPPER, "Simplest version that matches the reference:"),
    reply(TYPO, "A Triton kernel this time, one program per block:"),
    reply(CAPPED, "Fixed the name, and tuned the masks for the benchmark's size:"),
    reply(honest(256), "Launch enough programs for any n:"),
    reply(honest(1024), "Larger blocks: fewer programs to launch."),
    reply(CACHED, "Faster still: reuse the output when the same inputs come back."),
]


# ---- recording ---------------------------------------------------------------------------------------------

def _openai(server: ScriptedLLMServer, model: str) -> OpenAIProvider:
    return OpenAIProvider(model, base_url=server.openai_base_url, api_key="local", max_retries=0, recorder=Recorder())


def _anthropic(server: ScriptedLLMServer, model: str) -> AnthropicProvider:
    return AnthropicProvider(model, base_url=server.anthropic_base_url, api_key="local", max_retries=0,
                             recorder=Recorder())


def record_tutorial(path: Path = TUTORIAL) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with ScriptedLLMServer(TUTORIAL_SCRIPT) as server:
        run = run_agent("vector_add", _openai(server, "scripted-coder"), "refine",
                        AgentSettings(max_turns=len(TUTORIAL_SCRIPT), concurrency=1), transcript=path, run_id="tutorial",
                        progress=False)
    print(run.table().to_string(index=False), "\n", run.lineage().to_text(), sep="")


#: (model, protocol, stand-in) recorded for the ablation.
MODELS = [("scripted-careful", _openai, Careful), ("scripted-shortcut", _anthropic, Shortcut)]
FEEDBACKS = ["full", "errors", "none"]


def record_ablation(path: Path = ABLATION) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    for model, make, persona in MODELS:
        configs = [("refine", fb) for fb in FEEDBACKS] + [("best-of-n", "full")]
        for strategy, feedback in configs:
            stand_in = persona()
            run_id = f"{model}/{strategy}" + (f"/{feedback}" if strategy == "refine" else "")
            with ScriptedLLMServer([stand_in] * TURNS) as server:
                run = run_agent("vector_add", make(server, model), strategy,
                                # one call at a time: a stand-in's draws follow the order its calls arrive in
                                AgentSettings(max_turns=TURNS, feedback=feedback, concurrency=1), transcript=path,
                                run_id=run_id,
                                progress=False)
            print(f"{run_id}: " + " ".join(f"{n.node_id}={n.status}" + (f"[{','.join(n.flags)}]" if n.flags else "")
                                           for n in run.nodes), f"stop={run.stop_reason}", flush=True)


if __name__ == "__main__":
    which = set(sys.argv[1:]) or {"tutorial", "ablation"}
    if "tutorial" in which:
        record_tutorial()
    if "ablation" in which:
        record_ablation()
