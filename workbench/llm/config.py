"""LLM settings from (highest first) explicit arguments, environment variables, a config file, defaults.

Config file: $KWB_LLM_CONFIG, else $XDG_CONFIG_HOME/kernel-workbench/llm.toml (or llm.json), default
~/.config/kernel-workbench/llm.toml. Top-level keys apply to every provider; a table named after a provider
overrides them for that provider; `[prices]` extends the price table::

    provider = "openai"
    [openai]
    model = "qwen2.5-coder-32b"
    base_url = "http://localhost:8000/v1"      # vLLM / SGLang / Ollama / llama.cpp / OpenRouter
    [anthropic]
    model = "claude-sonnet-4-5"
    [prices]
    "qwen2.5-coder" = { input = 0.0, output = 0.0 }
    [token_params]                             # output-limit parameter by model-name prefix
    "my-reasoner" = "max_completion_tokens"

Besides model/base_url/temperature: `max_tokens` (the reply limit), `max_completion_tokens` (the same limit
sent under that name, as OpenAI's reasoning models want it), `token_param` (the name to send the limit under,
whatever the model), `timeout` (seconds per attempt), `max_retries`, `retry_base_delay`, `retry_max_delay`,
`max_retry_after` (the retry policy, workbench.llm.retry), `send_seed` (OpenAI-compatible servers get the
sample's seed unless false), `cache_policy` ("deterministic": the disk cache answers temperature-0 requests
only; "always").

API keys belong in the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY); `api_key` in the file also works.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from workbench.llm.errors import LLMConfigError

#: Generic variables (any provider). Provider-specific ones are in PROVIDER_ENV.
ENV = {
    "provider": "KWB_LLM_PROVIDER",
    "model": "KWB_LLM_MODEL",
    "base_url": "KWB_LLM_BASE_URL",
    "api_key": "KWB_LLM_API_KEY",
    "temperature": "KWB_LLM_TEMPERATURE",
    "max_tokens": "KWB_LLM_MAX_TOKENS",
    "timeout": "KWB_LLM_TIMEOUT",
    "max_retries": "KWB_LLM_MAX_RETRIES",
    "max_completion_tokens": "KWB_LLM_MAX_COMPLETION_TOKENS",
    "token_param": "KWB_LLM_TOKEN_PARAM",
    "cache_policy": "KWB_LLM_CACHE_POLICY",
    "cache_dir": "KWB_LLM_CACHE",
    "transcript": "KWB_LLM_TRANSCRIPT",
}

#: Per-provider variables, read after the generic ones lose (generic KWB_* wins when both are set).
PROVIDER_ENV = {
    "openai": {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL", "model": "OPENAI_MODEL"},
    "anthropic": {"api_key": "ANTHROPIC_API_KEY", "base_url": "ANTHROPIC_BASE_URL", "model": "ANTHROPIC_MODEL"},
    "replay": {},
}

#: Models that take the reply limit as `max_completion_tokens` (OpenAI's reasoning models), by name prefix;
#: everything else gets `max_tokens`. Extend or override with `[token_params]` in llm.toml.
DEFAULT_TOKEN_PARAMS = {"o1": "max_completion_tokens", "o3": "max_completion_tokens",
                        "o4": "max_completion_tokens", "gpt-5": "max_completion_tokens"}

#: Values of KWB_LLM_CACHE that turn the disk cache off.
_OFF = {"", "0", "off", "none", "false", "no"}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernel-workbench" / "llm"


def config_path() -> Path | None:
    """The config file in effect, or None when there is none."""
    explicit = os.environ.get("KWB_LLM_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.exists():
            raise LLMConfigError(f"KWB_LLM_CONFIG points to {path}, which does not exist; fix or unset it",
                                 setting="config", env="KWB_LLM_CONFIG")
        return path
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kernel-workbench"
    for name in ("llm.toml", "llm.json"):
        if (base / name).exists():
            return base / name
    return None


def read_config_file(path: str | os.PathLike | None) -> dict[str, Any]:
    if path is None:
        return {}
    path = Path(path)
    try:
        text = path.read_text()
        if path.suffix == ".json":
            return json.loads(text)
        import tomllib

        return tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise LLMConfigError(f"cannot read LLM config file {path}: {exc}", setting="config",
                             env="KWB_LLM_CONFIG") from exc


@dataclass
class LLMConfig:
    """Resolved settings for one provider. `source` says where each value came from (for error messages)."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float | None = None
    max_tokens: int = 4096
    #: The reply limit under the name reasoning models want; set, it wins over max_tokens and names the parameter.
    max_completion_tokens: int | None = None
    #: The parameter name the reply limit is sent under; None: by model name (token_params, DEFAULT_TOKEN_PARAMS).
    token_param: str | None = None
    token_params: dict[str, str] = field(default_factory=dict)
    #: Seconds one attempt may take.
    timeout: float = 120.0
    max_retries: int = 4
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    max_retry_after: float = 120.0
    #: Send each sample's seed to providers that take one.
    send_seed: bool = True
    cache_policy: str = "deterministic"
    #: Disk cache directory; None turns caching off.
    cache_dir: str | None = None
    #: Transcript file: where calls are written; for the replay provider, the file it answers from.
    transcript: str | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict, repr=False)

    def require(self, name: str) -> Any:
        """The value of a setting, or an error naming it and the ways to set it."""
        value = getattr(self, name)
        if value in (None, ""):
            envs = [ENV.get(name)] + [PROVIDER_ENV.get(self.provider, {}).get(name)]
            envs = [e for e in envs if e]
            raise LLMConfigError(
                f"LLM provider {self.provider!r} needs the setting `{name}`: set "
                + (" or ".join(f"${e}" for e in reversed(envs)) + ", " if envs else "")
                + f"pass {name}=... , or add `{name} = ...` under [{self.provider}] in {config_path() or _default_file()}",
                setting=name, env=envs[-1] if envs else None, provider=self.provider,
            )
        return value

    def reply_limit(self) -> int:
        """The output-token limit: max_completion_tokens when set, else max_tokens."""
        return int(self.max_completion_tokens or self.max_tokens)

    def token_param_for(self, model: str) -> str:
        """The name the reply limit is sent under for `model` (see DEFAULT_TOKEN_PARAMS)."""
        if self.token_param:
            return self.token_param
        if self.max_completion_tokens:
            return "max_completion_tokens"
        table = {**DEFAULT_TOKEN_PARAMS, **self.token_params}
        name = model.split("/")[-1]
        matches = [prefix for prefix in table if name.startswith(prefix) or model.startswith(prefix)]
        return table[max(matches, key=len)] if matches else "max_tokens"

    def retry_policy(self):
        from workbench.llm.retry import RetryPolicy

        return RetryPolicy(max_retries=self.max_retries, base_delay=self.retry_base_delay,
                           max_delay=self.retry_max_delay, max_retry_after=self.max_retry_after)

    def price_table(self):
        from workbench.llm.recording import PriceTable

        return PriceTable(self.prices)

    def recorder(self):
        from workbench.llm.recording import Recorder

        transcript = self.transcript if self.provider != "replay" else None
        return Recorder(cache=self.cache_dir, transcript=transcript, prices=self.price_table(),
                        cache_policy=self.cache_policy)


def _default_file() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kernel-workbench" / "llm.toml"


#: API key sent to a local server (vLLM, Ollama, llama.cpp) that checks none; the SDKs insist on one.
LOCAL_KEY = "no-key-needed"


def sdk_settings(config: LLMConfig) -> tuple[str, dict]:
    """(model, keyword arguments) for an SDK-backed provider; a key is required unless the server is local."""
    model = config.require("model")
    key = config.api_key
    if not key:
        if not is_loopback(config.base_url):
            config.require("api_key")
        key = LOCAL_KEY
    return model, dict(base_url=config.base_url, api_key=key, timeout=config.timeout, retry=config.retry_policy(),
                       temperature=config.temperature, max_tokens=config.reply_limit(), recorder=config.recorder())


def is_loopback(url: str | None) -> bool:
    """True for http://localhost / 127.x / ::1 URLs (local servers usually need no API key)."""
    if not url:
        return False
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_FLOAT_SETTINGS = ("temperature", "timeout", "retry_base_delay", "retry_max_delay", "max_retry_after")
_INT_SETTINGS = ("max_tokens", "max_retries", "max_completion_tokens")


def _coerce(name: str, value: Any, origin: str) -> Any:
    try:
        if name in _FLOAT_SETTINGS:
            return None if value in (None, "") else float(value)
        if name in _INT_SETTINGS:
            if name == "max_completion_tokens" and value in (None, "", 0, "0"):
                return None
            number = float(value)
            if number != int(number) or isinstance(value, bool):
                raise ValueError(value)
            return int(number)
    except (TypeError, ValueError) as exc:
        raise LLMConfigError(f"setting `{name}` from {origin} must be a{' whole' if name in _INT_SETTINGS else ''} "
                             f"number, got {value!r}", setting=name) from exc
    if name == "send_seed" and isinstance(value, str):
        return value.strip().lower() not in _OFF
    if name == "token_params" and not isinstance(value, dict):
        raise LLMConfigError(f"`token_params` from {origin} must be a table of model prefix = parameter name, "
                             f"got {value!r}", setting=name)
    return value


def load_config(provider: str | None = None, *, path: str | os.PathLike | None = None,
                env: dict[str, str] | None = None, **overrides: Any) -> LLMConfig:
    """Resolve settings for `provider` (None: the configured one, default "openai")."""
    env = dict(os.environ if env is None else env)
    file_path = Path(path) if path is not None else config_path()
    data = read_config_file(file_path)
    chosen = provider or overrides.pop("provider", None) or env.get(ENV["provider"]) or data.get("provider") or "openai"
    overrides.pop("provider", None)
    cfg = LLMConfig(provider=chosen, cache_dir=str(default_cache_dir()))
    cfg.source["provider"] = "argument" if provider else "env/file/default"
    known = {f.name for f in fields(LLMConfig)} - {"provider", "source"}

    def put(name: str, value: Any, origin: str) -> None:
        if name == "prices":
            cfg.prices.update(value or {})
        elif name == "token_params":
            cfg.token_params.update(_coerce(name, value or {}, origin))
        else:
            setattr(cfg, name, _coerce(name, value, origin))
        cfg.source[name] = origin

    # lowest first: file top level, file [provider] table, provider env, generic env, arguments
    for name, value in data.items():
        if name in known:
            put(name, value, str(file_path))
    section = data.get(chosen, {})
    if isinstance(section, dict):
        for name, value in section.items():
            if name not in known:
                raise LLMConfigError(f"unknown setting {name!r} under [{chosen}] in {file_path}; known: "
                                     f"{', '.join(sorted(known))}", setting=name, provider=chosen)
            put(name, value, f"{file_path} [{chosen}]")
    for name, var in PROVIDER_ENV.get(chosen, {}).items():
        if env.get(var):
            put(name, env[var], f"${var}")
    for name, var in ENV.items():
        if name != "provider" and var in env:
            put(name, env[var], f"${var}")
    for name, value in overrides.items():
        if name not in known:
            raise LLMConfigError(f"unknown LLM setting {name!r}; known: {', '.join(sorted(known))}", setting=name)
        if value is not None or name == "cache_dir":  # cache_dir=None turns the cache off
            put(name, value, "argument")
    if isinstance(cfg.cache_dir, str) and cfg.cache_dir.strip().lower() in _OFF:
        cfg.cache_dir = None
    return cfg
