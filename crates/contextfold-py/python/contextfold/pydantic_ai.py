"""contextfold for Pydantic AI: :class:`ContextfoldHistory`, a history processor, and
:class:`ContextfoldCapability`, the same as a capability that changes only the request.

.. code-block:: python

    from pydantic_ai import Agent
    from contextfold.pydantic_ai import ContextfoldCapability

    agent = Agent(model, tools=[...], capabilities=[ContextfoldCapability(window=200_000)])

The capability compacts the messages of each model request (``before_model_request``) and
leaves the run's history whole, the same rule as the proxy. ``ContextfoldHistory`` is a
plain history processor (``ProcessHistory(ContextfoldHistory(...))``, the form Pydantic AI
gives history processors); Pydantic AI keeps what a processor returns as the run's history.
Messages go to the engine as OpenAI Chat messages (tool calls and returns kept paired) and
compacted ones come back as ``ModelRequest`` / ``ModelResponse``. Each object serves one
conversation, so the prefix sent is the same between compactions.

Needs Pydantic AI (``pip install 'contextfold[pydantic-ai]'``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as err:  # pragma: no cover - exercised only without Pydantic AI
    raise ImportError("contextfold.pydantic_ai needs Pydantic AI: pip install 'contextfold[pydantic-ai]'") from err

from . import Middleware, Prepared
from ._bridge import Bridge

__all__ = ["ContextfoldCapability", "ContextfoldHistory", "to_openai", "from_openai"]


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [{"type": "text", "text": item if isinstance(item, str) else str(item)} for item in content]


def to_openai(message: ModelMessage) -> List[Dict[str, Any]]:
    """A Pydantic AI message as OpenAI Chat message dicts."""
    if isinstance(message, ModelResponse):
        text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
        thinking = "\n\n".join(part.content for part in message.parts if isinstance(part, ThinkingPart))
        entry: Dict[str, Any] = {"role": "assistant", "content": text or None}
        if thinking:
            entry["reasoning_content"] = thinking
        calls = [
            {
                "id": part.tool_call_id,
                "type": "function",
                "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
            }
            for part in message.parts
            if isinstance(part, ToolCallPart)
        ]
        if calls:
            entry["tool_calls"] = calls
        return [entry]
    entries: List[Dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            entries.append({"role": "system", "content": part.content})
        elif isinstance(part, ToolReturnPart):
            entries.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
        elif isinstance(part, RetryPromptPart) and part.tool_name:
            entries.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()})
        elif isinstance(part, RetryPromptPart):
            entries.append({"role": "user", "content": part.model_response()})
        elif isinstance(part, UserPromptPart):
            entries.append({"role": "user", "content": _user_content(part.content)})
    return entries


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def from_openai(entries: List[Dict[str, Any]]) -> List[ModelMessage]:
    """OpenAI Chat message dicts (a compaction's) as Pydantic AI messages: each assistant
    message a ``ModelResponse``, each run of the others one ``ModelRequest``."""
    names: Dict[str, str] = {}
    messages: List[ModelMessage] = []
    parts: List[Any] = []
    for entry in entries:
        role = entry.get("role")
        if role == "assistant":
            if parts:
                messages.append(ModelRequest(parts=parts))
                parts = []
            response: List[Any] = []
            if entry.get("reasoning_content"):
                response.append(ThinkingPart(content=entry["reasoning_content"]))
            if entry.get("content"):
                response.append(TextPart(content=_text(entry["content"])))
            for call in entry.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
                response.append(
                    ToolCallPart(
                        tool_name=call["function"]["name"],
                        args=call["function"].get("arguments") or "{}",
                        tool_call_id=call["id"],
                    )
                )
            messages.append(ModelResponse(parts=response))
        elif role == "tool":
            call = entry["tool_call_id"]
            parts.append(ToolReturnPart(tool_name=names.get(call, "tool"), content=_text(entry.get("content")), tool_call_id=call))
        elif role in ("system", "developer"):
            parts.append(SystemPromptPart(content=_text(entry.get("content"))))
        else:
            parts.append(UserPromptPart(content=_text(entry.get("content"))))
    if parts:
        messages.append(ModelRequest(parts=parts))
    return messages


class ContextfoldHistory:
    """A history processor: the messages to send for one conversation's history.

    ``window`` is the model's context window and ``reserve`` the tokens kept free for the
    answer; the other settings are :class:`contextfold.Middleware`'s (``target``, ``tools``,
    ``store``, ``strategy``, ``summarizer``, ``tokenizer``, ``recall_tool``).
    """

    def __init__(self, window: int, reserve: int = 16_000, **settings: Any) -> None:
        self.window, self.reserve, self.settings = window, reserve, settings
        self._bridge: Optional[Bridge] = None

    @property
    def bridge(self) -> Bridge:
        """The conversation's middleware behind Pydantic AI's messages."""
        if self._bridge is None:
            middleware = Middleware(self.window, self.reserve, format="openai", **self.settings)
            self._bridge = Bridge(middleware, to_openai, from_openai)
        return self._bridge

    @property
    def last(self) -> Optional[Prepared]:
        """What the last call prepared."""
        return self._bridge.last if self._bridge else None

    def __call__(self, messages: List[ModelMessage]) -> List[ModelMessage]:
        return self.bridge.prepare(messages)


@dataclasses.dataclass
class ContextfoldCapability(AbstractCapability[Any]):
    """Compacts the messages of each model request of one conversation, leaving the run's
    history whole. Takes :class:`ContextfoldHistory`'s settings."""

    window: int
    reserve: int = 16_000
    settings: Dict[str, Any] = dataclasses.field(default_factory=dict)
    history: Optional[ContextfoldHistory] = None

    def __post_init__(self) -> None:
        if self.history is None:
            self.history = ContextfoldHistory(self.window, self.reserve, **self.settings)

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        return None

    @property
    def last(self) -> Optional[Prepared]:
        """What the last call prepared."""
        return self.history.last if self.history else None

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        assert self.history is not None
        if self.history._bridge is None and "tools" not in self.history.settings:
            tools = _tools(request_context)
            if tools:
                self.history.settings["tools"] = tools
        messages = self.history(list(request_context.messages))
        return dataclasses.replace(request_context, messages=messages)


def _tools(request_context: Any) -> List[Dict[str, Any]]:
    """The request's function tools as OpenAI tool definitions, to count them."""
    parameters = getattr(request_context, "model_request_parameters", None)
    tools: Sequence[Any] = getattr(parameters, "function_tools", None) or []
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters_json_schema,
            },
        }
        for tool in tools
    ]


