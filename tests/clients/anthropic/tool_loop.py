"""A coding agent's tool loop with the official `anthropic` Python SDK, for the proxy's tests.

Usage: python tool_loop.py BASE_URL TASKS OUTPUT_CHARS

Asks for TASKS tasks one after another; within a task, answers every `Read` call with a
file's text of OUTPUT_CHARS characters until the model ends its turn. Calls alternate
between streaming (`messages.stream`) and not (`messages.create`); the assistant's content
goes back as the SDK parsed it. Prints one JSON line per call (what the SDK parsed), then
one for a `count_tokens` of the history with the next task asked.
"""

import json
import sys

import anthropic

MODEL = "claude-sonnet-4-5"
SYSTEM = "You are a careful coding agent. Read before you change anything."
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
    }
]


def file_text(path, chars):
    """The text of the file at `path`: numbered lines naming it, `chars` long."""
    lines, size, number = [], 0, 0
    while size < chars:
        line = f"{path}:{number}: fn step_{number}() -> Result<(), Error> {{ work({number}) }}\n"
        lines.append(line)
        size += len(line)
        number += 1
    return "".join(lines)


def main():
    base_url, tasks, chars = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = anthropic.Anthropic(base_url=base_url, api_key="test-key", max_retries=0, timeout=60.0)
    messages = [{"role": "user", "content": "task 0: read the parser's files"}]
    task, call = 0, 0
    while True:
        params = dict(model=MODEL, max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=messages)
        stream = call % 2 == 0
        sent = len(messages)
        if stream:
            with client.messages.stream(**params) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**params)
        content = [block.model_dump(exclude_none=True) for block in message.content]
        print(json.dumps({"call": call, "stream": stream, "sent": sent, "id": message.id,
                          "stop_reason": message.stop_reason, "content": content}), flush=True)
        messages.append({"role": "assistant", "content": message.content})
        call += 1
        if message.stop_reason == "tool_use":
            results = [
                {"type": "tool_result", "tool_use_id": block.id, "content": file_text(block.input["file_path"], chars)}
                for block in message.content
                if block.type == "tool_use"
            ]
            messages.append({"role": "user", "content": results})
            continue
        task += 1
        messages.append({"role": "user", "content": f"task {task}: read the next module's files"})
        if task == tasks:
            break
    # What the next request would cost, with the next task asked.
    count = client.messages.count_tokens(model=MODEL, system=SYSTEM, tools=TOOLS, messages=messages)
    print(json.dumps({"count_tokens": count.input_tokens, "sent": len(messages)}), flush=True)


if __name__ == "__main__":
    main()
