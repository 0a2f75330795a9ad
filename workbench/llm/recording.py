"""Call records, the on-disk response cache, price estimates and the transcript (JSONL) writer/reader.

Every LLM call leaves a `CallRecord`. Records go to the provider's `Recorder` (in memory) and, when a
transcript is attached, one JSON line each: the replay provider reads those lines back, so a transcript is
both the audit log of a session and the input for rerunning it without network.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.llm.errors import LLMConfigError

#: USD per million tokens (input, output) by model-name prefix, as listed publicly when written. Estimates
#: only: override or extend with the `[prices]` table of llm.toml (see workbench.llm.config).
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
}


class PriceTable:
    """Model name -> (input, output) USD per million tokens; the longest matching prefix wins."""

    def __init__(self, prices: dict[str, Any] | None = None, *, defaults: bool = True):
        self.prices: dict[str, tuple[float, float]] = dict(DEFAULT_PRICES) if defaults else {}
        for model, value in (prices or {}).items():
            self.prices[model] = _price_pair(model, value)

    def lookup(self, model: str) -> tuple[float, float] | None:
        name = model.split("/")[-1]  # OpenRouter-style "vendor/model"
        matches = [k for k in self.prices if name.startswith(k) or model.startswith(k)]
        return self.prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        """Estimated USD for one call, or None when the model has no price (local servers, unknown names)."""
        price = self.lookup(model)
        if price is None:
            return None
        return (tokens_in * price[0] + tokens_out * price[1]) / 1e6


def _price_pair(model: str, value: Any) -> tuple[float, float]:
    if isinstance(value, dict) and {"input", "output"} <= set(value):
        return float(value["input"]), float(value["output"])
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return float(value[0]), float(value[1])
    raise LLMConfigError(
        f"price for {model!r} must be {{input = USD per 1M tokens, output = USD per 1M tokens}}, got {value!r}",
        setting=f"prices.{model}",
    )


class ResponseCache:
    """Replies on disk, one JSON file per cache key, written atomically (safe with concurrent writers)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(key).read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(value, fh)
        os.replace(tmp, path)

    def __contains__(self, key: str) -> bool:
        return self._path(key).exists()

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*/*.json"))


class TranscriptWriter:
    """Appends JSON records, one a line, flushed at once so a killed session keeps what it did."""

    def __init__(self, path: str | os.PathLike, *, mode: str = "a"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, mode, encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)
        with self._lock:
            if self._fh.closed:  # a call abandoned by a stopped run answering late: the run's record is closed
                return
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_transcript(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a transcript, in order; a truncated last line (killed writer) is skipped."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


@dataclass
class CallRecord:
    """One LLM call as made (or answered from cache): what was asked, what came back, what it cost."""

    request_hash: str
    cache_key: str
    provider: str
    model: str
    endpoint: str
    request: dict[str, Any]
    reply: str | None
    finish_reason: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    #: Estimated price of the call (what it cost, or would have cost when answered from cache).
    cost_usd: float | None = None
    cached: bool = False
    error: str = ""
    #: Which attempt of the call this was (retries record one line each), and the failure's kind.
    attempt: int = 1
    error_kind: str = ""
    #: Reasoning text returned beside the answer (reasoning models); never searched for code.
    reasoning: str = ""
    timestamp: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    #: The agent run that made the call (lets one transcript hold several runs).
    run_id: str = ""
    kind: str = "call"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def spent_usd(self) -> float:
        """Money actually spent: zero for cached replies and for models without a price."""
        return 0.0 if self.cached or self.cost_usd is None else self.cost_usd


#: When the disk cache answers: "deterministic" (default) only requests at temperature 0, whose reply a
#: researcher expects to be the same; "always" every request (a sampled rerun then returns its old draws).
CACHE_POLICIES = ("deterministic", "always")


class Recorder:
    """Collects a provider's call records; optional disk cache and transcript.

    The cache answers by `cache_policy`: a sampled request (temperature above 0, or the provider's default)
    is a new draw each time unless the policy is "always". Its key holds the sample index, which the agent
    derives from the run's seed, so even under "always" a rerun with another seed draws anew.
    """

    def __init__(self, *, cache: ResponseCache | str | os.PathLike | None = None,
                 transcript: TranscriptWriter | str | os.PathLike | None = None, prices: PriceTable | None = None,
                 cache_policy: str = "deterministic"):
        if cache_policy not in CACHE_POLICIES:
            raise LLMConfigError(f"cache_policy must be one of {', '.join(CACHE_POLICIES)}, got {cache_policy!r}",
                                 setting="cache_policy", env="KWB_LLM_CACHE_POLICY")
        self.cache = ResponseCache(cache) if isinstance(cache, (str, os.PathLike)) else cache
        self.transcript = TranscriptWriter(transcript) if isinstance(transcript, (str, os.PathLike)) else transcript
        self.prices = prices or PriceTable()
        self.cache_policy = cache_policy
        self.calls: list[CallRecord] = []
        self._lock = threading.Lock()
        #: Set by the agent while a run is in progress; stamped on every record.
        self.run_id = ""

    def caches(self, request: Any) -> bool:
        """Whether the disk cache may answer (and keep) this request under the policy."""
        return self.cache_policy == "always" or request.temperature == 0

    def record(self, provider: Any, request: Any, reply: Any, *, cache_key: str, error: str = "",
               latency_s: float | None = None, attempt: int = 1, error_kind: str = "") -> CallRecord:
        rec = CallRecord(
            request_hash=request.key(), cache_key=cache_key, provider=provider.name, model=provider.model,
            endpoint=getattr(provider, "endpoint", ""), request=request.to_dict(),
            reply=reply.text if reply is not None else None,
            finish_reason=reply.finish_reason if reply is not None else "",
            tokens_in=reply.tokens_in if reply is not None else 0,
            tokens_out=reply.tokens_out if reply is not None else 0,
            latency_s=reply.latency_s if reply is not None else float(latency_s or 0.0),
            cost_usd=reply.cost_usd if reply is not None else None,
            cached=bool(reply.cached) if reply is not None else False, error=error, run_id=self.run_id,
            attempt=attempt, error_kind=error_kind, reasoning=getattr(reply, "reasoning", "") if reply else "",
        )
        with self._lock:
            self.calls.append(rec)
        if self.transcript is not None:
            self.transcript.write(rec.to_dict())
        return rec

    def totals(self) -> dict[str, Any]:
        """Calls, tokens, estimated and actually spent USD over everything recorded so far."""
        costs = [c.cost_usd for c in self.calls if c.cost_usd is not None]
        return {
            "calls": len(self.calls),
            "cached": sum(c.cached for c in self.calls),
            "errors": sum(bool(c.error) for c in self.calls),
            "tokens_in": sum(c.tokens_in for c in self.calls),
            "tokens_out": sum(c.tokens_out for c in self.calls),
            "cost_usd": sum(costs) if costs else None,
            "spent_usd": sum(c.spent_usd for c in self.calls),
        }
