"""contextfold for the OpenAI Agents SDK: :class:`ContextfoldInputFilter`, a
``call_model_input_filter`` for ``RunConfig``.

.. code-block:: python

    from agents import Agent, RunConfig, Runner
    from contextfold.openai_agents import ContextfoldInputFilter

    config = RunConfig(call_model_input_filter=ContextfoldInputFilter(window=200_000))
    result = Runner.run_sync(agent, "fix the failing test", run_config=config)

Before each model call it compacts the input items (Responses API items, read and written
by the engine losslessly: tool calls and their outputs kept paired); the run's own items are
never changed. The agent's instructions are counted as the system prompt. One filter serves
one conversation (give each conversation its own), so the prefix sent is the same between
compactions.

Needs the OpenAI Agents SDK (``pip install 'contextfold[openai-agents]'``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    from agents.run_config import CallModelData, ModelInputData
except ImportError as err:  # pragma: no cover - exercised only without the SDK
    raise ImportError(
        "contextfold.openai_agents needs the OpenAI Agents SDK: pip install 'contextfold[openai-agents]'"
    ) from err

from . import Middleware, Prepared
from ._bridge import Bridge

__all__ = ["ContextfoldInputFilter"]


def _item(item: Any) -> List[Dict[str, Any]]:
    """An input item (a dict, or a model of one), or the instructions, as Responses items."""
    if isinstance(item, str):
        return [{"role": "system", "content": item}]
    if isinstance(item, dict):
        return [item]
    return [item.model_dump(exclude_unset=True)]


def _items(entries: List[Dict[str, Any]]) -> List[Any]:
    """Items a compaction made are input items already."""
    return list(entries)


class ContextfoldInputFilter:
    """Compacts the model input of one conversation before each call.

    ``window`` is the model's context window and ``reserve`` the tokens kept free for the
    answer; the other settings are :class:`contextfold.Middleware`'s (``target``, ``tools``,
    ``store``, ``strategy``, ``summarizer``, ``tokenizer``, ``recall_tool``).
    """

    def __init__(self, window: int, reserve: int = 16_000, **settings: Any) -> None:
        self.window, self.reserve, self.settings = window, reserve, settings
        self._bridge: Optional[Bridge] = None

    @property
    def bridge(self) -> Bridge:
        """The conversation's middleware behind the SDK's input items."""
        if self._bridge is None:
            middleware = Middleware(self.window, self.reserve, format="responses", **self.settings)
            self._bridge = Bridge(middleware, _item, _items)
        return self._bridge

    @property
    def last(self) -> Optional[Prepared]:
        """What the last call prepared."""
        return self._bridge.last if self._bridge else None

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        instructions = data.model_data.instructions
        items = self.bridge.prepare(list(data.model_data.input), instructions or None)
        return ModelInputData(input=items, instructions=instructions)
