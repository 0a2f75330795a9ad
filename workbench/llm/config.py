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

from workbench.llm.base import LLMConfigError

#: Generic variables (any provider). Provider-specific ones are in PROVIDER_ENV.
ENV = {
    "provider": "KWB_LLM_PROVIDER",
    "model": "KWB_LLM_MODEL",
    "base_url": "KWB_LLM_BASE_URL",
    "api_key": "KWB_LLM_API_KEY",
    "temperature": "KWB_LLM_TEMPERATURE",
    "max_tokens": "KWB_LLM_MAX_TOKENS",
    "timeout": "KWB_LLM_TIMEOUT",
    "cache_dir": "KWB_LLM_CACHE",
    "transcript": "KWB_LLM_TRANSCRIPT",
}

#: Per-provider variables, read after the generic ones lose (generic KWB_* wins when both are set).
PROVIDER_ENV = {
    "openai": {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL", "model": "OPENAI_MODEL"},
    "anthropic": {"api_key": "ANTHROPIC_API_KEY", "base_url": "ANTHROPIC_BASE_URL", "model": "ANTHROPIC_MODEL"},
    "replay": {},
}

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
    timeout: float = 120.0
    max_retries: int = 2
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

    def price_table(self):
        from workbench.llm.recording import PriceTable

        return PriceTable(self.prices)

    def recorder(self):
        from workbench.llm.recording import Recorder

        transcript = self.transcript if self.provider != "replay" else None
        return Recorder(cache=self.cache_dir, transcript=transcript, prices=self.price_table())


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
    return model, dict(base_url=config.base_url, api_key=key, timeout=config.timeout, max_retries=config.max_retries,
                       temperature=config.temperature, max_tokens=config.max_tokens, recorder=config.recorder())


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


def _coerce(name: str, value: Any, origin: str) -> Any:
    try:
        if name in ("temperature", "timeout"):
            return None if value in (None, "") else float(value)
        if name in ("max_tokens", "max_retries"):
            return int(value)
    except (TypeError, ValueError) as exc:
        raise LLMConfigError(f"setting `{name}` from {origin} must be a number, got {value!r}", setting=name) from exc
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
