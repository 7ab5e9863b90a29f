"""The Pydantic AI adapter with Pydantic AI's agent loop and a FunctionModel that records
what it receives."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

pytest.importorskip("pydantic_ai", reason="Pydantic AI is not installed")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

import contextfold  # noqa: E402
from agents_common import FINAL, RESERVE, STEPS, WINDOW, prefixes_hold, read_file_text  # noqa: E402
from contextfold.pydantic_ai import ContextfoldCapability, ContextfoldHistory, to_openai  # noqa: E402


def run(capability: Any, watched: Any = None) -> tuple:
    watched = watched or capability
    calls: List[List[ModelMessage]] = []
    compacted: List[bool] = []

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(list(messages))
        compacted.append(bool(watched.last and watched.last.compacted))
        step = len(calls)
        if step <= STEPS:
            return ModelResponse(parts=[
                TextPart(content=f"Reading module {step}."),
                ToolCallPart(tool_name="read_file", args={"path": f"src/module_{step}.py"}, tool_call_id=f"call_{step}"),
            ])
        return ModelResponse(parts=[TextPart(content=FINAL)])

    agent = Agent(FunctionModel(model), instructions="You are a careful code reviewer.", capabilities=[capability])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Reads a file of the repository."""
        return read_file_text(path)

    result = agent.run_sync("Read every module and find the rounding bug.")
    return result, calls, compacted


def check_calls(calls: List[List[ModelMessage]]) -> None:
    for received in calls:
        entries = [entry for message in received for entry in to_openai(message)]
        assert contextfold.count_tokens(entries) <= WINDOW
        for index, message in enumerate(received):
            if isinstance(message, ModelResponse):
                asked = [part.tool_call_id for part in message.parts if isinstance(part, ToolCallPart)]
                if index + 1 < len(received):
                    answer = received[index + 1]
                    assert isinstance(answer, ModelRequest)
                    answered = [part.tool_call_id for part in answer.parts if isinstance(part, ToolReturnPart)]
                    assert answered == asked


def test_the_capability_compacts_requests_and_leaves_the_history_whole() -> None:
    capability = ContextfoldCapability(window=WINDOW, reserve=RESERVE)
    result, calls, compacted = run(capability)
    assert result.output == FINAL
    returns = [part for message in result.all_messages() for part in message.parts if isinstance(part, ToolReturnPart)]
    assert len(returns) == STEPS
    assert all(part.content == read_file_text(f"src/module_{n}.py") for n, part in enumerate(returns, start=1))
    assert any(compacted)
    check_calls(calls)
    assert prefixes_hold(calls, compacted, lambda a, b: a is b) >= 1


def test_the_history_processor_keeps_the_loop_in_the_window() -> None:
    history = ContextfoldHistory(WINDOW, RESERVE)
    result, calls, compacted = run(ProcessHistory(history), history)
    assert result.output == FINAL
    assert any(compacted)
    check_calls(calls)
    first = next(i for i, flag in enumerate(compacted) if flag)
    if first + 1 < len(calls) and not compacted[first + 1]:
        sent = [entry for message in calls[first] for entry in to_openai(message)]
        again = [entry for message in calls[first + 1] for entry in to_openai(message)]
        assert json.dumps(again[: len(sent)]) == json.dumps(sent)
