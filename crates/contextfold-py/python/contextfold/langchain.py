"""contextfold for LangChain v1 agents: :class:`ContextfoldMiddleware`, an ``AgentMiddleware``.

.. code-block:: python

    from langchain.agents import create_agent
    from contextfold.langchain import ContextfoldMiddleware

    agent = create_agent(model, tools, middleware=[ContextfoldMiddleware(window=200_000)])

Before each model call it compacts the messages of the model request (``wrap_model_call``);
the agent's state is never changed, so the full history stays in the graph and its
checkpoints. Messages go to the engine as OpenAI Chat messages (tool calls and their results
kept paired) and come back as LangChain messages. One middleware serves each conversation
(each LangGraph ``thread_id``, or the one conversation without one), so the prefix sent is
the same between compactions.

Needs ``langchain>=1`` (``pip install 'contextfold[langchain]'``).
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Dict, List, Optional

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as err:  # pragma: no cover - exercised only without LangChain
    raise ImportError(
        "contextfold.langchain needs LangChain v1: pip install 'contextfold[langchain]'"
    ) from err

from . import Middleware, Prepared
from ._bridge import Bridge

__all__ = ["ContextfoldMiddleware", "to_openai", "from_openai"]


def _text(content: Any) -> Any:
    """LangChain content as OpenAI content: a string, or text and image parts."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": part.get("text", "")})
        elif isinstance(part, dict) and part.get("type") == "image_url":
            parts.append(part)
        elif isinstance(part, dict) and "text" in part:
            parts.append({"type": "text", "text": str(part["text"])})
    return parts


def _plain(content: Any) -> str:
    """LangChain content as one string."""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in _text(content) if part.get("type") == "text")


def to_openai(message: BaseMessage) -> List[Dict[str, Any]]:
    """A LangChain message as OpenAI Chat message dicts (one)."""
    if isinstance(message, AIMessage):
        entry: Dict[str, Any] = {"role": "assistant", "content": _plain(message.content) or None}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in message.tool_calls
            ]
        return [entry]
    if isinstance(message, ToolMessage):
        return [{"role": "tool", "tool_call_id": message.tool_call_id, "content": _plain(message.content)}]
    if isinstance(message, SystemMessage):
        return [{"role": "system", "content": _plain(message.content)}]
    return [{"role": "user", "content": _text(message.content)}]


def from_openai(entries: List[Dict[str, Any]]) -> List[BaseMessage]:
    """OpenAI Chat message dicts (a compaction's) as LangChain messages."""
    messages: List[BaseMessage] = []
    for entry in entries:
        role, content = entry.get("role"), entry.get("content")
        if role == "assistant":
            calls = [
                {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "args": json.loads(call["function"].get("arguments") or "{}"),
                    "type": "tool_call",
                }
                for call in entry.get("tool_calls") or []
            ]
            messages.append(AIMessage(content=content or "", tool_calls=calls))
        elif role == "tool":
            messages.append(ToolMessage(content=_plain(content or ""), tool_call_id=entry["tool_call_id"]))
        elif role in ("system", "developer"):
            messages.append(SystemMessage(content=content or ""))
        else:
            messages.append(HumanMessage(content=content or ""))
    return messages


class ContextfoldMiddleware(AgentMiddleware):
    """Compacts the messages of each model request, one contextfold middleware per
    conversation.

    ``window`` is the model's context window and ``reserve`` the tokens kept free for the
    answer; the other settings are :class:`contextfold.Middleware`'s (``target``, ``store``,
    ``strategy``, ``summarizer``, ``tokenizer``, ``recall_tool``). The request's system
    message and tools are counted, never changed.
    """

    def __init__(self, window: int, reserve: int = 16_000, **settings: Any) -> None:
        super().__init__()
        self.window, self.reserve, self.settings = window, reserve, settings
        self._conversations: Dict[Any, Bridge] = {}

    def bridge(self, thread: Any = None) -> Optional[Bridge]:
        """The conversation of ``thread`` (a LangGraph ``thread_id``; ``None`` without one),
        once it has had a model call."""
        return self._conversations.get(thread)

    @property
    def last(self) -> Optional[Prepared]:
        """What the last call of the conversation without a ``thread_id`` prepared."""
        bridge = self.bridge()
        return bridge.last if bridge else None

    def _prepare(self, request: ModelRequest) -> ModelRequest:
        thread = _thread_id()
        bridge = self._conversations.get(thread)
        if bridge is None:
            tools = [convert_to_openai_tool(tool) for tool in request.tools if not isinstance(tool, dict)]
            tools += [tool for tool in request.tools if isinstance(tool, dict)]
            middleware = Middleware(self.window, self.reserve, tools=tools or None, format="openai", **self.settings)
            bridge = self._conversations[thread] = Bridge(middleware, to_openai, from_openai)
        messages = bridge.prepare(request.messages, request.system_message)
        return request.override(messages=messages)

    def _observe(self, response: Any) -> None:
        result = getattr(response, "result", None) or [response]
        usage = getattr(result[-1], "usage_metadata", None) or {}
        bridge = self._conversations.get(_thread_id())
        if bridge is not None and usage.get("input_tokens"):
            bridge.middleware.observe_usage(int(usage["input_tokens"]))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        response = handler(self._prepare(request))
        self._observe(response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        response = await handler(self._prepare(request))
        self._observe(response)
        return response


def _thread_id() -> Any:
    """The LangGraph ``thread_id`` of the run in progress, if any."""
    try:
        from langgraph.config import get_config

        return (get_config().get("configurable") or {}).get("thread_id")
    except (ImportError, RuntimeError):
        return None
