"""`kwb agent run|resume|list`: the LLM generate-evaluate-refine loop from a shell.

Every field of `AgentSettings` has an option (SETTING_OPTIONS; a test keeps the two in step), and the
provider takes the settings `get_provider` takes, so a run started here is the run `run_agent` would make.
The run's settings go into the store's journal: `kwb agent resume RUN_ID` goes on from the last recorded step
(options given then override the recorded ones), `kwb agent list` shows the runs.

A provider that fails fails steps, not the command: each failed step is a row with its cause, and the run
stops only at its failure budget or a failure no retry can fix, printing why. Ctrl-C stops at once, records
what was done and prints the command that resumes. Exit codes: 0 a correct kernel was found, 1 none was,
2 usage error, 3 the workbench failed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from workbench import languages
from workbench.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_size,
    device_arg,
    open_store,
    parse_size,
    positive,
)

#: AgentSettings field -> its command-line option.
SETTING_OPTIONS = {
    "language": "--language", "device": "--device", "size": "--size", "seed": "--seed", "rounds": "--rounds",
    "timeout": "--eval-timeout", "time_it": "--no-time", "feedback": "--feedback", "max_turns": "--turns",
    "max_tokens": "--token-budget", "max_seconds": "--max-seconds", "target_speedup": "--target-speedup",
    "patience": "--patience", "n": "--n", "population": "--population", "temperature": "--temperature",
    "instructions": "--instructions", "initial_prompt": "--prompt-file", "samples_per_round": "--samples-per-round",
    "concurrency": "--concurrency", "max_cost_usd": "--max-cost", "max_failed_steps": "--max-failed-steps",
    "continue_truncated": "--continue-truncated",
}
#: get_provider setting -> its command-line option (the API key comes from the environment or llm.toml only).
PROVIDER_OPTIONS = {
    "model": "--model", "base_url": "--base-url", "max_tokens": "--max-tokens",
    "max_completion_tokens": "--max-completion-tokens", "token_param": "--token-param", "timeout": "--timeout",
    "max_retries": "--max-retries", "retry_base_delay": "--retry-delay", "cache_policy": "--cache-policy",
    "send_seed": "--no-seed",
}


def _nonnegative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _add_setting_options(p: argparse.ArgumentParser) -> None:
    """The loop's settings; every default is None so that `resume` overrides only what was typed."""
    g = p.add_argument_group("the loop (AgentSettings)")
    g.add_argument("--turns", dest="max_turns", type=positive(int), help="candidates to ask for (default 5)")
    g.add_argument("--samples-per-round", type=positive(int), help="refine: drafts per round from one node")
    g.add_argument("--concurrency", type=positive(int),
                   help="candidates in progress at once (LLM calls + evaluations); 1 = strictly serial (default 4)")
    g.add_argument("--n", type=positive(int), help="best-of-n: samples (default: --turns)")
    g.add_argument("--population", type=positive(int), help="evolutionary: population size (default 4)")
    g.add_argument("--feedback", help="feedback preset: full (default), none, errors, correctness, no-roofline")
    g.add_argument("--temperature", type=float, help="sampling temperature (default: the provider's)")
    g.add_argument("--seed", type=int, help="run seed: evaluation inputs and every sample's seed (default 0)")
    g.add_argument("--instructions", help="extra instructions appended to every prompt")
    g.add_argument("--prompt-file", dest="initial_prompt", help="text file that replaces the first prompt")
    g.add_argument("--token-budget", dest="max_tokens", type=positive(int), help="stop after this many tokens")
    g.add_argument("--max-cost", dest="max_cost_usd", type=positive(float), help="stop after this many USD")
    g.add_argument("--max-seconds", type=positive(float), help="stop after this many seconds")
    g.add_argument("--target-speedup", type=positive(float), help="stop once a kernel is this much faster")
    g.add_argument("--patience", type=positive(int), help="stop after N candidates without a new best")
    g.add_argument("--max-failed-steps", type=positive(int), help="failed LLM steps tolerated (default 3)")
    g.add_argument("--continue-truncated", type=_nonnegative,
                   help="ask a reply cut at the token limit to go on, up to N times (default 0)")
    g.add_argument("--language", choices=list(languages.names()), help="kernel language (default triton)")
    g.add_argument("--device", type=device_arg, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--size", help="size preset (cpu, gpu) or NAME=VALUE,...")
    g.add_argument("--rounds", type=positive(int), help="correctness rounds per candidate (default 5)")
    g.add_argument("--eval-timeout", dest="timeout", type=positive(float),
                   help="seconds a candidate may take for any one step")
    g.add_argument("--no-time", dest="time_it", action="store_const", const=False,
                   help="check correctness only, skip timing")


def _add_provider_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the model (get_provider; keys from $OPENAI_API_KEY / $ANTHROPIC_API_KEY or llm.toml)")
    g.add_argument("--provider", choices=["openai", "anthropic", "replay"], help="default: $KWB_LLM_PROVIDER or openai")
    g.add_argument("--model", help="model id (default: $KWB_LLM_MODEL or llm.toml)")
    g.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://localhost:8000/v1")
    g.add_argument("--max-tokens", type=positive(int), help="reply limit in tokens (default 4096)")
    g.add_argument("--max-completion-tokens", type=positive(int), help="reply limit sent as max_completion_tokens")
    g.add_argument("--token-param", help="name the reply limit is sent under (max_tokens, max_completion_tokens)")
    g.add_argument("--timeout", type=positive(float), help="seconds one LLM call may take (default 120)")
    g.add_argument("--max-retries", type=_nonnegative, help="retries of a failing call (default 4)")
    g.add_argument("--retry-delay", dest="retry_base_delay", type=float, help="first backoff in seconds (default 1)")
    g.add_argument("--cache-policy", choices=["deterministic", "always"],
                   help="disk cache: temperature-0 requests only (default) or always")
    g.add_argument("--no-seed", dest="send_seed", action="store_const", const=False,
                   help="do not send the sample's seed (for servers that reject it)")
    g.add_argument("--transcript", help="JSONL file every call and candidate is appended to (replay reads it)")


def add_agent_commands(sub: argparse._SubParsersAction) -> None:
    agent = sub.add_parser("agent", help="run, resume and list LLM generate-evaluate-refine loops",
                           description=__doc__.split("\n\n")[0])
    commands = agent.add_subparsers(dest="agent_command", required=True, metavar="{run,resume,list}")
    run = commands.add_parser("run", help="start a loop", description="Ask a model for kernels for a task, judge "
                              "each, feed the verdict back. Exit 0 if a correct kernel was found, 1 if not.")
    run.add_argument("--task", required=True, help="registered task name (`kwb tasks`) or a KernelBench .py file")
    run.add_argument("--strategy", default="refine",
                     help="refine (default), best-of-n, evolutionary, single-shot, or a registered one")
    run.add_argument("--store", default="results.db", help="results store (SQLite); keeps the run for resume")
    run.add_argument("--run-id", help="id for the run (default: generated)")
    _add_provider_options(run)
    _add_setting_options(run)
    run.set_defaults(handler=cmd_run)

    again = commands.add_parser("resume", help="continue a run from its last recorded step",
                                description="Continue a run with its recorded settings; options override them "
                                            "(--turns 10 extends a finished run).")
    again.add_argument("run_id")
    again.add_argument("--store", default="results.db")
    _add_provider_options(again)
    _add_setting_options(again)
    again.set_defaults(handler=cmd_resume)

    listing = commands.add_parser("list", help="the runs a store holds")
    listing.add_argument("--store", default="results.db")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)


# ---- options -> API arguments ----------------------------------------------------------------------------------

def setting_changes(args: argparse.Namespace, task: Any = None) -> dict[str, Any]:
    """The AgentSettings fields the user typed."""
    from workbench.cli.common import read_text_file

    changes = {name: getattr(args, name) for name in SETTING_OPTIONS if getattr(args, name, None) is not None}
    if "size" in changes:
        changes["size"] = parse_size(changes["size"])
        if task is not None:
            check_size(task, changes["size"])
    if "initial_prompt" in changes:
        changes["initial_prompt"] = read_text_file(changes["initial_prompt"], "prompt file")
    return changes


def provider_changes(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in PROVIDER_OPTIONS if getattr(args, name, None) is not None}


def _provider(name: str | None, settings: dict[str, Any]):
    from workbench.llm.errors import LLMConfigError
    from workbench.llm.registry import get_provider

    try:
        return get_provider(name, **settings)
    except LLMConfigError as exc:
        raise UsageError(str(exc)) from None


def _settings(changes: dict[str, Any]):
    from workbench.llm.runs import AgentError, AgentSettings

    try:
        return AgentSettings(**changes)
    except AgentError as exc:
        raise UsageError(str(exc)) from None


# ---- progress and summary --------------------------------------------------------------------------------------

class ProgressLine:
    """One line on stderr per candidate (redrawn in place on a terminal): verdict, best, tokens, money."""

    def __init__(self, total: int, stream: Any = None):
        self.total, self.stream = total, stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, node: Any, loop: Any) -> None:
        from workbench.llm.nodes import progress_text

        flags = f" [{','.join(node.flags)}]" if node.flags else ""
        text = f"[{len(loop.nodes)}/{self.total}] {node.node_id} {node.status}{flags} · {progress_text(loop)}"
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def summary(run: Any, store: str) -> str:
    from workbench.cli.format import format_table

    rows = []
    for n in run.nodes:
        time_ms = f"{n.time_ms:.4g} ms" if n.time_ms is not None else "-"
        rows.append((n.node_id, n.parent or "-", n.role, n.status, ",".join(n.flags) or "-", time_ms,
                     n.tokens_in + n.tokens_out, n.message or "-"))
    table = format_table(rows, ["node", "parent", "role", "status", "flags", "time", "tokens", "note"], max_width=60)
    best = run.best
    spent = run.usage.get("run_spent_usd") or 0.0
    lines = [table, "", f"stopped: {run.stop_reason}" + (f" ({run.error})" if run.error else ""),
             f"best: {best.summary() if best else 'no correct kernel'}",
             f"{len(run.nodes)} candidates, {len(run.failed)} failed steps, {run.usage.get('run_tokens', 0)} tokens, "
             f"${spent:.4f} spent",
             f"run id: {run.run_id}  (kwb agent resume {run.run_id} --store {store})"]
    return "\n".join(lines)


def _execute(start, store: str, total: int) -> int:
    from workbench.llm.agent import AgentInterrupted

    progress = ProgressLine(total)
    try:
        run = start(progress)
    except AgentInterrupted as exc:
        progress.close()
        run = exc.run
        print(f"kwb agent: interrupted after {len(run.nodes)} candidates (all recorded); resume with "
              f"`kwb agent resume {run.run_id} --store {store}`", file=sys.stderr)
        return 130
    progress.close()
    print(summary(run, store))
    if run.stop_reason == "llm-error":
        print(f"kwb agent: the run stopped on LLM errors: {run.error}", file=sys.stderr)
    return EXIT_OK if run.best is not None else EXIT_FAILED


# ---- commands --------------------------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    from workbench.cli.eval import load_task_arg
    from workbench.llm.agent import run_agent
    from workbench.llm.strategies import get_strategy

    get_strategy(args.strategy)  # an unknown name is a usage error listing the known ones
    task = load_task_arg(args.task)
    settings = _settings(setting_changes(args, task))
    store_path = args.store
    store = open_store(store_path)
    provider = _provider(args.provider, provider_changes(args))
    print(f"kwb agent: {args.strategy} on {task.name} with {provider.name} {provider.model}, {settings.max_turns} "
          f"candidates, {settings.concurrency} at once; store {store_path}", file=sys.stderr)
    return _execute(lambda progress: run_agent(task, provider, args.strategy, settings, store=store,
                                               run_id=args.run_id, transcript=args.transcript, progress=False,
                                               on_node=progress), store_path, settings.max_turns)


def cmd_resume(args: argparse.Namespace) -> int:
    from workbench.llm.agent import list_runs, provider_from_settings, resume
    from workbench.llm.runs import AgentError, AgentSettings

    store = open_store(args.store, create=False)
    header = next((r for r in list_runs(store) if r["run_id"] == args.run_id), None)
    if header is None:
        known = [r["run_id"] for r in list_runs(store)]
        raise UsageError(f"no agent run {args.run_id!r} in {args.store}; runs there: {', '.join(known) or '(none)'}")
    changes = setting_changes(args)
    typed = provider_changes(args)
    provider = None
    if typed or args.provider:
        recorded = dict(header["provider"] or {})
        if args.provider and args.provider != recorded.get("provider"):
            recorded = {"provider": args.provider}
        provider = _wrap_config(lambda: provider_from_settings({**recorded, **typed}))
    else:
        provider = _wrap_config(lambda: provider_from_settings(header["provider"] or {}))
    try:
        total = AgentSettings.from_dict(header["settings"]).replace(**changes).max_turns
    except AgentError as exc:
        raise UsageError(str(exc)) from None
    print(f"kwb agent: resuming {args.run_id} ({header['strategy']} on {header['task']}, {header['nodes']} "
          f"candidates so far, {header['status']}); store {args.store}", file=sys.stderr)
    return _execute(lambda progress: resume(args.run_id, store=store, provider=provider, transcript=args.transcript,
                                            progress=False, on_node=progress, **changes), args.store, total)


def _wrap_config(build):
    from workbench.llm.base import LLMConfigError

    try:
        return build()
    except LLMConfigError as exc:
        raise UsageError(f"cannot rebuild the run's provider: {exc}") from None


def cmd_list(args: argparse.Namespace) -> int:
    import json

    from workbench.cli.format import format_table
    from workbench.llm.agent import list_runs

    if not Path(args.store).exists():
        raise UsageError(f"no results store at {args.store}; start a run with `kwb agent run --store {args.store}`")
    runs = list_runs(open_store(args.store, create=False))
    if args.json:
        print(json.dumps(runs, indent=2, default=str))
        return EXIT_OK
    if not runs:
        print(f"no agent runs in {args.store}")
        return EXIT_OK
    rows = [(r["run_id"], r["task"], r["strategy"], (r["provider"] or {}).get("model", "-"), r["status"],
             r["stop_reason"] or "-", r["nodes"], r["started"]) for r in runs]
    print(format_table(rows, ["run_id", "task", "strategy", "model", "status", "stopped", "candidates", "started"]))
    return EXIT_OK
