"""The LangChain adapter with LangChain's own agent loop and a fake chat model that records
what it receives."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

langchain = pytest.importorskip("langchain", reason="LangChain is not installed")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

import contextfold  # noqa: E402
from agents_common import FINAL, RESERVE, STEPS, WINDOW, prefixes_hold, read_file_text  # noqa: E402
from contextfold.langchain import ContextfoldMiddleware, to_openai  # noqa: E402


@tool
def read_file(path: str) -> str:
    """Reads a file of the repository."""
    return read_file_text(path)


class RecordingModel(BaseChatModel):
    """Asks for one file read per call, then answers; records every request."""

    calls: List[List[BaseMessage]] = []
    compacted: List[bool] = []
    middleware: Any = None

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "RecordingModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        self.compacted.append(bool(self.middleware.last and self.middleware.last.compacted))
        step = len(self.calls)
        if step <= STEPS:
            message = AIMessage(
                content=f"Reading module {step}.",
                tool_calls=[{"name": "read_file", "args": {"path": f"src/module_{step}.py"}, "id": f"call_{step}"}],
            )
        else:
            message = AIMessage(content=FINAL)
        return ChatResult(generations=[ChatGeneration(message=message)])


def entries(messages: List[BaseMessage]) -> List[dict]:
    return [entry for message in messages for entry in to_openai(message)]


def test_a_long_tool_loop_stays_in_the_window_with_every_call_answered() -> None:
    middleware = ContextfoldMiddleware(window=WINDOW, reserve=RESERVE)
    model = RecordingModel(calls=[], compacted=[], middleware=middleware)
    agent = create_agent(model, [read_file], system_prompt="You are a careful code reviewer.", middleware=[middleware])
    result = agent.invoke({"messages": [{"role": "user", "content": "Read every module and find the rounding bug."}]},
                          {"recursion_limit": 500})

    # The agent reached its answer, and its state holds the whole history, unchanged.
    assert result["messages"][-1].content == FINAL
    assert len(result["messages"]) == 1 + 2 * STEPS + 1
    assert all(
        message.content == read_file_text(f"src/module_{index}.py")
        for index, message in enumerate((m for m in result["messages"] if isinstance(m, ToolMessage)), start=1)
    )
    assert len(model.calls) == STEPS + 1
    assert any(model.compacted), "the loop outgrew the window, so it compacted"
    for received in model.calls:
        assert contextfold.count_tokens(entries(received)) <= WINDOW
        calls, results = [], []
        for message in received:
            if isinstance(message, AIMessage):
                assert calls == results, "every tool call is answered before the next model turn"
                calls = results = []
                calls = [call["id"] for call in message.tool_calls]
                results = []
            elif isinstance(message, ToolMessage):
                results.append(message.tool_call_id)
        assert calls == results or (calls and not results and received[-1] is not None)
    checked = prefixes_hold(model.calls, model.compacted, lambda a, b: a is b)
    assert checked >= 1, "a call followed a compaction without compacting again"
    # What the model received after a compaction serializes to the same bytes too.
    first = next(i for i, flag in enumerate(model.compacted) if flag)
    if first + 1 < len(model.calls) and not model.compacted[first + 1]:
        sent, again = entries(model.calls[first]), entries(model.calls[first + 1])
        assert json.dumps(again[: len(sent)]) == json.dumps(sent)


def test_each_thread_is_its_own_conversation() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    middleware = ContextfoldMiddleware(window=WINDOW, reserve=RESERVE)
    model = RecordingModel(calls=[], compacted=[], middleware=middleware)
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    for thread in ("a", "b"):
        model.calls.clear()
        agent.invoke({"messages": [{"role": "user", "content": f"Thread {thread}: read the modules."}]},
                     {"configurable": {"thread_id": thread}, "recursion_limit": 500})
    assert middleware.bridge("a") is not None and middleware.bridge("b") is not None
    assert middleware.bridge("a") is not middleware.bridge("b")
