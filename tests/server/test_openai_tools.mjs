// The official OpenAI client library (npm `openai`) calling tools through mhla-server:
// tests/server/data/toolcall/model learned, greedily, the replies of its
// conversations.json (a Qwen 2.5 template, the hermes format). With the client's
// chat.completions.create: a request with tools gets the reply's calls as tool_calls
// (finish_reason tool_calls), the same calls streamed as tool_calls deltas that the
// library's stream helper puts together, two calls in one reply, and the round trip
// (the calls sent back with the tool's result) answered in text; tool_choice
// required and a named function force calls.
//
// usage: node test_openai_tools.mjs BIN_DIR WORK_DIR
// The server runs on a free 127.0.0.1 port and is always killed at the end.
import OpenAI from 'openai';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, run, startServer, waitPort } from './server_proc.mjs';

const [binDir, work] = process.argv.slice(2);
if (!binDir || !work) {
  console.error('usage: node test_openai_tools.mjs BIN_DIR WORK_DIR');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const data = path.join(here, 'data', 'toolcall');

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
const cases = JSON.parse(fs.readFileSync(path.join(data, 'conversations.json'), 'utf8'));
const byName = Object.fromEntries(cases.map((c) => [c.name, c]));
const server = startServer(binDir, work, ['--model', path.join(data, 'model'), '--chat-template',
  path.join(data, 'Qwen-Qwen2.5-7B-Instruct.jinja'), '--model-name', 'fixture'], 590000);

function sameCalls(got, want) {
  return Array.isArray(got) && got.length === want.length && got.every((g, i) =>
    g.type === 'function' && g.id && g.function.name === want[i].name &&
    JSON.stringify(JSON.parse(g.function.arguments)) === JSON.stringify(want[i].arguments));
}

function request(c) {
  return { model: 'fixture', messages: c.messages, tools: c.tools, temperature: 0, max_tokens: 200 };
}

async function main() {
  const port = await waitPort(server);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0 });
  for (const name of ['hermes-weather', 'hermes-parallel']) {
    const c = byName[name];
    const r = await client.chat.completions.create(request(c));
    const ch = r.choices[0];
    check(ch.finish_reason === 'tool_calls' && ch.message.content === null &&
          sameCalls(ch.message.tool_calls, c.tool_calls),
          `${name}: tool_calls ${JSON.stringify(ch.message.tool_calls)}`);
    // the library's stream helper merges tool_calls deltas into the final message
    const stream = client.beta?.chat?.completions?.stream
      ? client.beta.chat.completions.stream(request(c))
      : client.chat.completions.stream(request(c));
    let deltas = 0;
    stream.on('chunk', (chunk) => { if (chunk.choices[0]?.delta?.tool_calls) deltas++; });
    const fin = await stream.finalChatCompletion();
    const fc = fin.choices[0];
    check(fc.finish_reason === 'tool_calls' && sameCalls(fc.message.tool_calls, c.tool_calls) &&
          deltas >= 1, `${name}: streamed, ${deltas} tool_calls delta chunk(s) give the same calls`);
  }
  // the round trip: the calls go back with their result, the model answers in text
  const rt = byName['hermes-roundtrip'];
  const r = await client.chat.completions.create(request(rt));
  check(r.choices[0].finish_reason === 'stop' && r.choices[0].message.content === rt.reply &&
        !r.choices[0].message.tool_calls, `round trip: "${r.choices[0].message.content}"`);
  // a forced call: the weather question, but get_time named, so the grammar holds the
  // reply to a get_time call whatever the model would rather write
  const w = byName['hermes-weather'];
  const forced = await client.chat.completions.create({ ...request(w),
    tool_choice: { type: 'function', function: { name: 'get_time' } } });
  const fc = forced.choices[0];
  check(fc.finish_reason === 'tool_calls' && fc.message.tool_calls?.length === 1 &&
        fc.message.tool_calls[0].function.name === 'get_time' &&
        typeof JSON.parse(fc.message.tool_calls[0].function.arguments) === 'object',
        `a named tool_choice forces that call: ${JSON.stringify(fc.message.tool_calls)}`);
  const req = await client.chat.completions.create({ ...request(w), tool_choice: 'required' });
  check(req.choices[0].finish_reason === 'tool_calls' &&
        sameCalls(req.choices[0].message.tool_calls, w.tool_calls),
        'tool_choice required: the call the model would make anyway');
}

await run(server, main, 'OpenAI tool-call');
