// A tool loop through contextfold serve with the official openai package for Node.
//
// Usage: node tool_loop.cjs BASE_URL chat|responses stream|whole NAME OUTPUT_CHARS
//
// Calls the API until the model stops calling tools, answering each call with OUTPUT_CHARS
// of output, and prints {"turns": N, "final": TEXT} as JSON. Exits non-zero on any error.
const openai = require("openai");
const OpenAI = openai.OpenAI ?? openai.default ?? openai;

function toolOutput(name, callId, chars) {
  let out = "";
  for (let line = 0; out.length < chars; line++) {
    out += `${name} ${callId} line ${line}: fn step_${line}() -> Result<(), Error> { work(${line}) }\n`;
  }
  return out;
}

async function chat(client, stream, name, chars) {
  const messages = [
    { role: "system", content: "You are a careful coding agent." },
    { role: "user", content: `[${name}] port the parser` },
  ];
  const tools = [{ type: "function", function: { name: "read_file", description: "Read a file",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } } }];
  for (let turns = 0; ; turns++) {
    let message, finish;
    if (stream) {
      let content = "", usage = null;
      const calls = [];
      const events = await client.chat.completions.create({ model: "gpt-4.1", messages, tools, stream: true,
        stream_options: { include_usage: true }, prompt_cache_key: name });
      for await (const chunk of events) {
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices) {
          content += choice.delta.content ?? "";
          for (const call of choice.delta.tool_calls ?? []) {
            calls[call.index] ??= { id: null, type: "function", function: { name: "", arguments: "" } };
            calls[call.index].id = call.id ?? calls[call.index].id;
            calls[call.index].function.name += call.function?.name ?? "";
            calls[call.index].function.arguments += call.function?.arguments ?? "";
          }
          finish = choice.finish_reason ?? finish;
        }
      }
      if (!usage || !(usage.prompt_tokens > 0)) throw new Error("no usage chunk");
      message = { role: "assistant", content: content || null };
      if (calls.length) message.tool_calls = calls;
    } else {
      const answer = await client.chat.completions.create({ model: "gpt-4.1", messages, tools, prompt_cache_key: name });
      finish = answer.choices[0].finish_reason;
      message = answer.choices[0].message;
    }
    messages.push(message);
    if (finish !== "tool_calls") return { turns, final: message.content };
    for (const call of message.tool_calls) {
      JSON.parse(call.function.arguments);
      messages.push({ role: "tool", tool_call_id: call.id, content: toolOutput(name, call.id, chars) });
    }
  }
}

async function responses(client, stream, name, chars) {
  const input = [
    { type: "message", role: "developer", content: [{ type: "input_text", text: `You work for ${name}; commands run without approval.` }] },
    { type: "message", role: "user", content: [{ type: "input_text", text: `[${name}] fix the failing test` }] },
  ];
  const tools = [{ type: "function", name: "exec_command", description: "Runs a command.", strict: false,
    parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } }];
  for (let turns = 0; ; turns++) {
    const request = { model: "gpt-5-codex", instructions: "You are a coding agent.", input, tools, store: false,
      include: ["reasoning.encrypted_content"], prompt_cache_key: `thread-${name}` };
    let output = null;
    if (stream) {
      for await (const event of await client.responses.create({ ...request, stream: true })) {
        if (event.type === "response.completed") output = event.response.output;
      }
      if (!output) throw new Error("the stream did not complete");
    } else {
      output = (await client.responses.create(request)).output;
    }
    input.push(...output);
    const calls = output.filter((item) => item.type === "function_call");
    if (!calls.length) {
      const final = output.filter((item) => item.type === "message").flatMap((item) => item.content).map((part) => part.text).join("");
      return { turns, final };
    }
    for (const call of calls) {
      JSON.parse(call.arguments);
      input.push({ type: "function_call_output", call_id: call.call_id, output: toolOutput(name, call.call_id, chars) });
    }
  }
}

async function main() {
  const [baseURL, api, mode, name, chars] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "sk-test-not-a-real-key", maxRetries: 0, timeout: 60_000 });
  const loop = api === "chat" ? chat : responses;
  console.log(JSON.stringify(await loop(client, mode === "stream", name, Number(chars))));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
