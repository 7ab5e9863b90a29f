// A coding agent's tool loop with the official `@anthropic-ai/sdk` for Node, for the proxy's
// tests: the same loop as tool_loop.py.
//
// Usage: node tool_loop.cjs NODE_MODULES BASE_URL TASKS OUTPUT_CHARS
//
// Asks for TASKS tasks one after another; within a task, answers every `Read` call with a
// file's text of OUTPUT_CHARS characters until the model ends its turn. Calls alternate
// between streaming (`messages.stream`) and not (`messages.create`); the assistant's content
// goes back as the SDK parsed it. Prints one JSON line per call (what the SDK parsed), then
// one for a `countTokens` of the history with the next task asked.
'use strict';

const path = require('node:path');

const [nodeModules, baseURL, tasksArg, charsArg] = process.argv.slice(2);
const Anthropic = require(path.join(nodeModules, '@anthropic-ai/sdk')).default;

const MODEL = 'claude-sonnet-4-5';
const SYSTEM = 'You are a careful coding agent. Read before you change anything.';
const TOOLS = [
  {
    name: 'Read',
    description: 'Read a file',
    input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
  },
];

// The text of the file at `file`: numbered lines naming it, `chars` long.
function fileText(file, chars) {
  let text = '';
  for (let number = 0; text.length < chars; number++) {
    text += `${file}:${number}: fn step_${number}() -> Result<(), Error> { work(${number}) }\n`;
  }
  return text;
}

// A block as parsed, without the fields the SDK leaves null.
function parsed(block) {
  return Object.fromEntries(Object.entries(block).filter(([, value]) => value !== null && value !== undefined));
}

async function main() {
  const tasks = Number(tasksArg);
  const chars = Number(charsArg);
  const client = new Anthropic({ baseURL, apiKey: 'test-key', maxRetries: 0, timeout: 60_000 });
  const messages = [{ role: 'user', content: "task 0: read the parser's files" }];
  let task = 0;
  for (let call = 0; ; call++) {
    const params = { model: MODEL, max_tokens: 1024, system: SYSTEM, tools: TOOLS, messages };
    const stream = call % 2 === 0;
    const sent = messages.length;
    const message = stream
      ? await client.messages.stream(params).finalMessage()
      : await client.messages.create(params);
    const content = message.content.map(parsed);
    const line = { call, stream, sent, id: message.id, stop_reason: message.stop_reason, content };
    process.stdout.write(JSON.stringify(line) + '\n');
    messages.push({ role: 'assistant', content: message.content });
    if (message.stop_reason === 'tool_use') {
      const results = message.content
        .filter((block) => block.type === 'tool_use')
        .map((block) => ({ type: 'tool_result', tool_use_id: block.id, content: fileText(block.input.file_path, chars) }));
      messages.push({ role: 'user', content: results });
      continue;
    }
    task += 1;
    messages.push({ role: 'user', content: `task ${task}: read the next module's files` });
    if (task === tasks) break;
  }
  // What the next request would cost, with the next task asked.
  const count = await client.messages.countTokens({ model: MODEL, system: SYSTEM, tools: TOOLS, messages });
  process.stdout.write(JSON.stringify({ count_tokens: count.input_tokens, sent: messages.length }) + '\n');
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
