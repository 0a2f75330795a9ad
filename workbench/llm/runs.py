"""Records of an agent run: its settings, one Node per LLM turn, the AgentRun, and the Lineage tree.

Kept apart from the loop (workbench.llm.agent) so that reading runs back -- from memory, a store or a
transcript -- needs none of the machinery that makes them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from workbench.candidate import Candidate
from workbench.errors import UnknownNameError, WorkbenchError
from workbench.llm.feedback import FeedbackOptions, feedback_options
from workbench.result import Result
from workbench.tasks.task import Task


class AgentError(WorkbenchError):
    """An agent run could not start or be reconstructed (unknown run, node, missing transcript header)."""


# ---- settings --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AgentSettings:
    """Everything that shapes a run besides the task, provider and strategy. Stored with every run."""

    language: str = "triton"
    device: str | None = None
    size: dict[str, Any] | str | None = None
    seed: int = 0
    rounds: int = 5
    timeout: float | None = None
    time_it: bool = True
    feedback: FeedbackOptions = field(default_factory=FeedbackOptions)
    # budget: the run stops at whichever comes first
    max_turns: int = 5
    max_tokens: int | None = None
    max_seconds: float | None = None
    # stop rules
    target_speedup: float | None = None
    #: Stop after this many turns without a new best.
    patience: int | None = None
    # strategy knobs
    #: Samples for best-of-n (default: the turn budget).
    n: int | None = None
    #: Population size for the evolutionary strategy.
    population: int = 4
    temperature: float | None = None
    #: Extra instructions appended to every prompt.
    instructions: str = ""
    #: Replaces the generated first prompt's text (what a user typed in the prompt box).
    initial_prompt: str | None = None
    # concurrency: how many candidates are in progress at once (asked, awaiting or under evaluation)
    #: Refine: drafts asked from the same node per round (best-of-n asks n, evolutionary its population).
    samples_per_round: int = 1
    #: Candidates in progress at once: LLM calls in flight plus replies waiting for or under evaluation.
    #: 1 is the strictly serial loop; more overlaps generation with evaluation.
    concurrency: int = 4
    #: Stop (cleanly: calls in flight finish and are judged) once this much USD is spent.
    max_cost_usd: float | None = None
    #: Failed LLM steps (every retry spent) the run tolerates before it stops; None: no limit.
    max_failed_steps: int | None = 3
    #: Ask a reply cut at the token limit to go on, up to this many times (0: report it as truncated).
    continue_truncated: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "feedback", feedback_options(self.feedback))
        for name in ("max_turns", "samples_per_round", "concurrency", "population"):
            if int(getattr(self, name)) < 1:
                raise AgentError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("max_failed_steps", "n"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise AgentError(f"{name} must be at least 1 (or None), got {value}")
        if self.continue_truncated < 0:
            raise AgentError(f"continue_truncated must be 0 or more, got {self.continue_truncated}")
        for name in ("max_cost_usd", "max_seconds", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise AgentError(f"{name} must be positive (or None), got {value}")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["feedback"] = self.feedback.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def replace(self, **changes: Any) -> AgentSettings:
        return dataclasses.replace(self, **changes)


# ---- nodes and runs ----------------------------------------------------------------------------------------

#: Statuses of steps that produced no kernel to judge: every retry failed (`llm_error`), or the reply was cut at
#: the token limit (`truncated`). The evaluation's own statuses are workbench.result.STATUSES.
LLM_ERROR = "llm_error"
TRUNCATED = "truncated"
LLM_STATUSES = (LLM_ERROR, TRUNCATED)

#: Columns of `AgentRun.table()`: what a replay must reproduce exactly (no timings, no prompt hashes).
TABLE_COLUMNS = ("turn", "node", "parent", "role", "candidate_id", "status", "flags", "outcome")


@dataclass
class Node:
    """One LLM turn: the prompt it answered, the candidate it produced and that candidate's verdict."""

    run_id: str
    node_id: str
    turn: int
    parent: str | None
    role: str
    strategy: str
    candidate_id: str
    status: str
    flags: list[str] = field(default_factory=list)
    message: str = ""
    outcome: str = "ok"
    #: Run of the parent when it is not this run (a fork's first turns).
    parent_run: str | None = None
    generation: int = 0
    sample: int = 0
    prompt_id: str = ""
    template: str = ""
    author: str = ""
    time_ms: float | None = None
    speedup: float | None = None
    #: 95% CI (low, high) of the speedup and its A/B verdict (faster | slower | same | inconclusive).
    speedup_ci: tuple[float, float] | list[float] | None = None
    speedup_verdict: str | None = None
    sol_fraction: float | None = None
    bound: str | None = None
    max_abs_err: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    cached: bool = False
    request_hash: str = ""
    feedback: dict[str, Any] = field(default_factory=dict)
    feedback_text: str = ""
    duplicate_of: str | None = None
    # the LLM call behind the node
    finish_reason: str = ""
    latency_s: float | None = None
    temperature: float | None = None
    #: The seed sent with the request (None when the provider takes none).
    seed: int | None = None
    #: Attempts the call took, continuations appended to a cut reply, and the failure's kind (llm_error).
    attempts: int = 0
    continued: int = 0
    error_kind: str = ""
    reasoning: str = field(default="", repr=False)
    source: str = field(default="", repr=False)
    result: Result | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def answered(self) -> bool:
        """Whether the model replied at all (a failed call leaves nothing to refine)."""
        return self.status != LLM_ERROR

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.node_id}"

    @property
    def fitness(self) -> float | None:
        """Higher is better; None unless correct. Speedup when known, else 1/time (interpreter runs)."""
        if not self.ok:
            return None
        if self.speedup is not None:
            return float(self.speedup)
        return 1.0 / self.time_ms if self.time_ms else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "result"}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], result: Result | None = None) -> Node:
        known = {f.name for f in dataclasses.fields(cls)} - {"result"}
        return cls(**{k: v for k, v in data.items() if k in known}, result=result)

    def summary(self) -> str:
        flags = f" [{','.join(self.flags)}]" if self.flags else ""
        speed = f" {self.speedup:.2f}x" if self.speedup is not None else (
            f" {self.time_ms:.3g} ms" if self.time_ms is not None else "")
        parent = f" <- {self.parent}" if self.parent else ""
        return f"{self.node_id} {self.role}{parent}: {self.status}{flags}{speed}"


def better(a: Node, b: Node | None) -> bool:
    """Is `a` strictly better than the best so far `b`? Correctness gates, then fitness. With confidence intervals
    (GPU timings), the whole 95% CI of `a`'s speedup must lie above `b`'s speedup: a gain inside the timing noise
    does not replace the best (the A/B rule of the timing statistics)."""
    fa = a.fitness
    if fa is None:
        return False
    if b is None or b.fitness is None:
        return True
    if a.speedup_ci and b.speedup is not None:
        return float(a.speedup_ci[0]) > float(b.speedup)
    return fa > b.fitness


def _best_of(nodes: list[Node]) -> Node | None:
    best = None
    for node in nodes:
        if better(node, best):
            best = node
    return best


def frame_of(rows: list[dict[str, Any]], columns: list[str] | tuple[str, ...] | None = None):
    import pandas as pd

    frame = pd.DataFrame(rows)
    if columns is not None:
        frame = frame.reindex(columns=list(columns))
    return frame


@dataclass
class AgentRun:
    """A finished (or stopped) run: its nodes in turn order, why it stopped, what it cost."""

    run_id: str
    task: Task
    strategy: str
    settings: AgentSettings
    provider: str
    model: str
    nodes: list[Node] = field(default_factory=list)
    stop_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    transcript: str | None = None
    #: The node a fork started from (another run's), shown as this run's root's parent.
    forked_from: Node | None = None
    error: str = ""
    #: Nodes this run had before this session (a resumed run); they are part of `nodes` too.
    resumed: int = 0
    #: What rebuilds the provider (`BaseProvider.settings()`, no key): fork and resume use it.
    provider_settings: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[Node]:
        """Steps whose LLM call failed for good (status llm_error), with their cause in `message`."""
        return [n for n in self.nodes if n.status == LLM_ERROR]

    @property
    def best(self) -> Node | None:
        """The best correct node (correctness first, then speedup or time); None when nothing passed."""
        return _best_of(self.nodes)

    @property
    def best_candidate(self) -> Candidate | None:
        best = self.best
        if best is None:
            return None
        parent = next((n for n in self.nodes if n.node_id == best.parent), self.forked_from)
        return Candidate(source=best.source, language=self.settings.language, author=best.author,
                         prompt_id=best.prompt_id, parent_id=parent.candidate_id if best.parent and parent else None,
                         name=f"{self.task.name}-{self.run_id[:8]}-{best.node_id}")

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        if self.forked_from is not None and node_id in (self.forked_from.node_id, self.forked_from.key):
            return self.forked_from
        raise UnknownNameError("node", node_id, [n.node_id for n in self.nodes])

    def table(self):
        """The reproducible part of the run (see TABLE_COLUMNS) as a DataFrame; a replay must equal it."""
        return frame_of([table_row(n) for n in self.nodes], TABLE_COLUMNS)

    def frame(self):
        """Every node with its measurements (times vary between reruns)."""
        rows = []
        for n in self.nodes:
            row = n.to_dict()
            row.pop("source")
            row["flags"] = ",".join(n.flags)
            row["feedback"] = FeedbackOptions.from_dict(n.feedback).label if n.feedback else ""
            rows.append(row)
        return frame_of(rows)

    def lineage(self) -> Lineage:
        return Lineage.from_nodes(self.run_id, self.nodes, external=[self.forked_from] if self.forked_from else [])

    def best_so_far(self) -> list[float | None]:
        return self.lineage().best_so_far()

    def __repr__(self) -> str:
        best = self.best
        return (f"AgentRun({self.run_id!r}, {self.strategy}, {len(self.nodes)} nodes, stop={self.stop_reason!r}, "
                f"best={best.summary() if best else None})")


def table_row(node: Node) -> dict[str, Any]:
    return {"turn": node.turn, "node": node.node_id, "parent": node.parent or "", "role": node.role,
            "candidate_id": node.candidate_id, "status": node.status, "flags": ",".join(node.flags),
            "outcome": node.outcome}


# ---- lineage --------------------------------------------------------------------------------------------------

@dataclass
class Lineage:
    """A run's tree: nodes with parent links (a fork's external root included, marked by its run id)."""

    run_id: str
    nodes: dict[str, Node]
    #: Nodes of other runs that this run's nodes descend from (forks).
    external: dict[str, Node] = field(default_factory=dict)

    @classmethod
    def from_nodes(cls, run_id: str, nodes: list[Node], external: list[Node] | None = None) -> Lineage:
        return cls(run_id, {n.node_id: n for n in sorted(nodes, key=lambda n: n.turn)},
                   {n.key: n for n in (external or []) if n is not None})

    def parent_key(self, node: Node) -> str | None:
        if node.parent is None:
            return None
        return f"{node.parent_run}/{node.parent}" if node.parent_run else node.parent

    def roots(self) -> list[str]:
        """Top-level ids: this run's parentless nodes, and the external nodes forks start from."""
        return list(self.external) + [k for k, n in self.nodes.items() if n.parent is None]

    def children(self, key: str) -> list[str]:
        return [k for k, n in self.nodes.items() if self.parent_key(n) == key]

    def edges(self) -> list[tuple[str, str]]:
        return [(self.parent_key(n), k) for k, n in self.nodes.items() if n.parent is not None]

    def path(self, node_id: str) -> list[str]:
        """Ancestors from the root down to `node_id`."""
        out, key = [], node_id
        while key is not None and key in self.nodes:
            out.append(key)
            key = self.parent_key(self.nodes[key])
        if key is not None:
            out.append(key)
        return out[::-1]

    def depth(self, node_id: str) -> int:
        return len(self.path(node_id)) - 1

    @property
    def best(self) -> Node | None:
        return _best_of(list(self.nodes.values()))

    def best_so_far(self) -> list[float | None]:
        """Fitness of the best correct node after each turn (None until one passes)."""
        best, out = None, []
        for node in self.nodes.values():
            if better(node, best):
                best = node
            out.append(best.fitness if best is not None else None)
        return out

    def frame(self):
        rows = []
        for key, node in self.nodes.items():
            rows.append({"node": key, "parent": self.parent_key(node), "depth": self.depth(key), "turn": node.turn,
                         "role": node.role, "status": node.status, "flags": ",".join(node.flags),
                         "speedup": node.speedup, "time_ms": node.time_ms, "candidate_id": node.candidate_id,
                         "prompt_id": node.prompt_id})
        return frame_of(rows)

    def to_text(self) -> str:
        """An indented tree, one node a line, best marked with '*'."""
        best = self.best
        lines: list[str] = []

        def walk(key: str, indent: int) -> None:
            node = self.nodes.get(key) or self.external.get(key)
            mark = " *" if best is not None and node is best else ""
            label = node.summary() if node is not None else key
            if key in self.external:
                label = f"{key} (other run) {node.status if node else ''}"
            lines.append("  " * indent + label + mark)
            for child in self.children(key):
                walk(child, indent + 1)

        for root in self.roots():
            walk(root, 0)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Lineage({self.run_id!r}, {len(self.nodes)} nodes)\n{self.to_text()}"
