"""Which provider a name builds: the built-in ones (`openai`, `anthropic`, `replay`) and any registered since.

The registry sits above the providers: it imports them, they never import it. Each provider module offers a
`from_config(LLMConfig)` factory and registers nothing on import; when the registry lived in workbench.llm.base,
every provider registered itself into base on import and base imported them all to make sure they had, a circle
in which whichever module loaded first saw the other half-built. The built-in factories are imported the first time
a provider is asked for, so `import workbench.llm` loads no provider module (the SDKs load even later, when a
provider is built).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.errors import UnknownNameError
from workbench.llm.base import Provider
from workbench.llm.config import load_config

#: Factories registered by name (`register_provider`); a name here wins over a built-in one of the same name.
_PROVIDERS: dict[str, Callable[..., Provider]] = {}


def register_provider(name: str, factory: Callable[..., Provider]) -> None:
    """Register a provider factory: called with an `LLMConfig` and keyword overrides."""
    _PROVIDERS[name] = factory


def _factories() -> dict[str, Callable[..., Provider]]:
    """Every name a provider can be built under -> its factory: the built-in ones, then the registered ones."""
    from workbench.llm.anthropic_provider import from_config as anthropic
    from workbench.llm.openai_provider import from_config as openai
    from workbench.llm.replay import from_config as replay

    return {"anthropic": anthropic, "openai": openai, "replay": replay, **_PROVIDERS}


def providers() -> list[str]:
    """Names of the providers `get_provider` can build."""
    return sorted(_factories())


def get_provider(name: str | None = None, **settings: Any) -> Provider:
    """Build a provider from the config file + env vars, with `settings` taking precedence.

    `get_provider()` uses KWB_LLM_PROVIDER; `get_provider("openai", model="...", base_url="...")` is explicit.
    """
    factories = _factories()
    config = load_config(provider=name, **settings)
    if config.provider not in factories:
        raise UnknownNameError("LLM provider", config.provider, list(factories))
    return factories[config.provider](config)
