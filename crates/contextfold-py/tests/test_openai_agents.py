"""The OpenAI Agents SDK adapter with the SDK's runner and a fake model that records the
input it receives."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed")

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

import contextfold  # noqa: E402
from agents_common import FINAL, RESERVE, STEPS, WINDOW, prefixes_hold, read_file_text  # noqa: E402
from contextfold.openai_agents import ContextfoldInputFilter  # noqa: E402


class RecordingModel(Model):
    """Asks for one file read per call, then answers; records every input."""

    def __init__(self, flt: ContextfoldInputFilter) -> None:
        self.filter = flt
        self.calls: List[List[Any]] = []
        self.compacted: List[bool] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls.append(list(input))
        self.compacted.append(bool(self.filter.last and self.filter.last.compacted))
        step = len(self.calls)
        if step <= STEPS:
            output: List[Any] = [ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{step}", name="read_file",
                arguments=json.dumps({"path": f"src/module_{step}.py"}), id=f"fc_{step}", status="completed",
            )]
        else:
            output = [ResponseOutputMessage(
                id="msg_final", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])],
            )]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def read_file(path: str) -> str:
    """Reads a file of the repository."""
    return read_file_text(path)


def test_a_long_tool_loop_stays_in_the_window_with_every_call_answered() -> None:
    flt = ContextfoldInputFilter(WINDOW, RESERVE)
    model = RecordingModel(flt)
    agent = Agent(name="reviewer", instructions="You are a careful code reviewer.", tools=[read_file], model=model,
                  model_settings=ModelSettings())
    config = RunConfig(call_model_input_filter=flt, tracing_disabled=True)
    result = Runner.run_sync(agent, "Read every module and find the rounding bug.", run_config=config, max_turns=STEPS + 5)
    assert result.final_output == FINAL
    outputs = [item for item in result.to_input_list() if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert len(outputs) == STEPS
    assert any(model.compacted)
    for received in model.calls:
        items = [item if isinstance(item, dict) else item.model_dump(exclude_unset=True) for item in received]
        conversation = {"instructions": "You are a careful code reviewer.", "input": items}
        assert contextfold.count_tokens(conversation, format="responses") <= WINDOW
        asked = [item["call_id"] for item in items if item.get("type") == "function_call"]
        answered = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
        assert asked == answered
    assert prefixes_hold(model.calls, model.compacted, lambda a, b: json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)) >= 1
