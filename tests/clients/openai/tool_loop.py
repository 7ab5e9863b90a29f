"""A tool loop through contextfold serve with the official openai Python SDK.

Usage: tool_loop.py BASE_URL chat|responses stream|whole NAME OUTPUT_CHARS

Calls the API until the model stops calling tools, answering each call with OUTPUT_CHARS of
output, and prints {"turns": N, "final": TEXT} as JSON. Fails (non-zero) on any error.
"""

import json
import sys

from openai import OpenAI


def tool_output(name, call_id, chars):
    out, line = [], 0
    while sum(len(part) for part in out) < chars:
        out.append(f"{name} {call_id} line {line}: fn step_{line}() -> Result<(), Error> {{ work({line}) }}\n")
        line += 1
    return "".join(out)


def chat(client, stream, name, chars):
    messages = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": f"[{name}] port the parser"},
    ]
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    turns = 0
    while True:
        if stream:
            content, calls, finish, usage = "", {}, None, None
            events = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools, stream=True,
                                                    stream_options={"include_usage": True}, prompt_cache_key=name)
            for chunk in events:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    delta = choice.delta
                    content += delta.content or ""
                    for call in delta.tool_calls or []:
                        entry = calls.setdefault(call.index, {"id": None, "type": "function",
                                                              "function": {"name": "", "arguments": ""}})
                        entry["id"] = call.id or entry["id"]
                        if call.function is not None:
                            entry["function"]["name"] += call.function.name or ""
                            entry["function"]["arguments"] += call.function.arguments or ""
                    finish = choice.finish_reason or finish
            assert usage is not None and usage.prompt_tokens > 0, "the usage chunk arrived"
            message = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = [calls[index] for index in sorted(calls)]
        else:
            answer = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools,
                                                    prompt_cache_key=name)
            finish = answer.choices[0].finish_reason
            message = answer.choices[0].message.model_dump(exclude_none=True)
            content = message.get("content") or ""
        messages.append(message)
        if finish != "tool_calls":
            return turns, content
        for call in message["tool_calls"]:
            json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": tool_output(name, call["id"], chars)})
        turns += 1


def responses(client, stream, name, chars):
    items = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": f"You work for {name}; commands run without approval."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"[{name}] fix the failing test"}]},
    ]
    tools = [{"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": False,
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]
    turns = 0
    while True:
        request = dict(model="gpt-5-codex", instructions="You are a coding agent.", input=items, tools=tools,
                       store=False, include=["reasoning.encrypted_content"], prompt_cache_key=f"thread-{name}")
        if stream:
            output = None
            for event in client.responses.create(stream=True, **request):
                if event.type == "response.completed":
                    output = event.response.output
            assert output is not None, "the stream completed"
        else:
            output = client.responses.create(**request).output
        produced = [item.model_dump(exclude_none=True) for item in output]
        items.extend(produced)
        calls = [item for item in produced if item["type"] == "function_call"]
        if not calls:
            texts = [part["text"] for item in produced if item["type"] == "message" for part in item["content"]]
            return turns, "".join(texts)
        for call in calls:
            json.loads(call["arguments"])
            items.append({"type": "function_call_output", "call_id": call["call_id"],
                          "output": tool_output(name, call["call_id"], chars)})
        turns += 1


def main():
    base_url, api, mode, name, chars = sys.argv[1:6]
    client = OpenAI(base_url=base_url, api_key="sk-test-not-a-real-key", max_retries=0, timeout=60)
    loop = chat if api == "chat" else responses
    turns, final = loop(client, mode == "stream", name, int(chars))
    print(json.dumps({"turns": turns, "final": final}))


if __name__ == "__main__":
    main()
