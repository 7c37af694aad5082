// The official OpenAI client library (npm `openai`, its Completions and Chat Completions
// APIs) against mhla-server: non-streaming and streaming (the library's own SSE parser reads every
// stream to the end), usage chunks, logprobs, error classes, and 32 concurrent streams
// with different prompt lengths, sampling settings and seeds, each identical to the same
// request served alone.
//
// usage: node test_openai.mjs BIN_DIR WORK_DIR PYTHON
// The server runs on a free 127.0.0.1 port and is always killed at the end.
import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, run, startServer, waitPort } from './server_proc.mjs';

const [binDir, work, python] = process.argv.slice(2);
if (!binDir || !work || !python) {
  console.error('usage: node test_openai.mjs BIN_DIR WORK_DIR PYTHON');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
const model = path.join(work, 'model');
execFileSync(python, [path.join(here, '..', 'tools', 'gen_checkpoint.py'), '--out', model,
  '--vocab', '256', '--hidden', '64', '--layers', '2', '--heads', '4', '--chunk', '16',
  '--blocks', '32', '--seed', '4'], { stdio: 'inherit', timeout: 60000 });

const server = startServer(binDir, work, ['--model', model, '--model-name', 'demo', '--api-key',
  'k-123'], 890000); // never outlive ctest (900 s)

async function collect(stream) {
  // every choice's text and ids, the finish reasons, the usage chunk, the chunk count
  const per = new Map();
  let usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const p = per.get(c.index) ?? { text: '', ids: [], finish: null, lp: [] };
      p.text += c.text;
      p.ids.push(...(c.token_ids ?? []));
      if (c.finish_reason) p.finish = c.finish_reason;
      if (c.logprobs) p.lp.push(...c.logprobs.token_logprobs);
      per.set(c.index, p);
    }
  }
  const choices = [...per.keys()].sort((a, b) => a - b).map((k) => per.get(k));
  return { choices, usage, chunks };
}

async function main() {
  const port = await waitPort(server);
  const client = new OpenAI({ apiKey: 'k-123', baseURL: `http://127.0.0.1:${port}/v1`,
    maxRetries: 0, timeout: 60000 });

  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'demo', 'models.list names the model');

  // non-streaming
  const req = { model: 'demo', prompt: 'Hello, linear attention', max_tokens: 24,
    temperature: 0.8, top_p: 0.95, seed: 42, ignore_eos: true, return_token_ids: true };
  const full = await client.completions.create(req);
  check(full.object === 'text_completion' && full.choices.length === 1 &&
        typeof full.choices[0].text === 'string' && full.choices[0].finish_reason === 'length' &&
        full.usage.completion_tokens === 24 && full.usage.prompt_tokens === 23,
        'completions.create: shape, finish_reason and usage');

  // streaming: the library's parser reads the stream to its end
  const st = await client.completions.create({ ...req, stream: true,
    stream_options: { include_usage: true } });
  const got = await collect(st);
  check(got.choices.length === 1 && got.choices[0].text === full.choices[0].text &&
        JSON.stringify(got.choices[0].ids) === JSON.stringify(full.choices[0].token_ids) &&
        got.choices[0].finish === 'length',
        'streamed text and ids concatenated equal the non-streamed ones');
  check(got.usage && got.usage.completion_tokens === 24 && got.usage.total_tokens === 47,
        'the usage chunk arrives through the stream parser');

  // n = 2, logprobs, echo
  const lp = await client.completions.create({ model: 'demo', prompt: 'abc', max_tokens: 5,
    n: 2, logprobs: 2, echo: true, seed: 3, ignore_eos: true });
  const l0 = lp.choices[0].logprobs;
  check(lp.choices.length === 2 && l0.tokens.length === 3 + 5 && l0.token_logprobs[0] === null &&
        l0.token_logprobs.slice(1).every((x) => x <= 0) && l0.top_logprobs[1] !== null &&
        lp.choices[0].text.startsWith('abc'),
        'n=2 with echo and logprobs in the legacy shape');
  const lps = await collect(await client.completions.create({ model: 'demo', prompt: 'abc',
    max_tokens: 5, logprobs: 2, seed: 3, ignore_eos: true, stream: true }));
  check(JSON.stringify(lps.choices[0].lp) === JSON.stringify(l0.token_logprobs.slice(3)),
        'streamed logprobs equal the non-streamed ones');

  // chat: plain and streaming through the library's Chat Completions API
  const creq = { model: 'demo', messages: [{ role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hello there' }], max_tokens: 12, temperature: 0, ignore_eos: true };
  const chat = await client.chat.completions.create(creq);
  check(chat.object === 'chat.completion' && chat.id.startsWith('chatcmpl-') &&
        chat.choices.length === 1 && chat.choices[0].message.role === 'assistant' &&
        typeof chat.choices[0].message.content === 'string' &&
        chat.choices[0].finish_reason === 'length' && chat.usage.completion_tokens === 12,
        'chat.completions.create: shape, finish_reason and usage');
  const cst = await client.chat.completions.create({ ...creq, stream: true,
    stream_options: { include_usage: true } });
  let ctext = '', role = null, cfinish = null, cusage = null, firstDelta = null;
  for await (const chunk of cst) {
    if (chunk.usage) cusage = chunk.usage;
    for (const c of chunk.choices) {
      if (firstDelta === null) firstDelta = c.delta;
      if (c.delta.role) role = c.delta.role;
      ctext += c.delta.content ?? '';
      if (c.finish_reason) cfinish = c.finish_reason;
    }
  }
  check(firstDelta && firstDelta.role === 'assistant' && role === 'assistant' &&
        ctext === chat.choices[0].message.content && cfinish === 'length' &&
        cusage && cusage.completion_tokens === 12,
        'chat stream: role delta first, content equal to the non-streamed message, usage chunk');
  let etools = null;
  try {
    await client.chat.completions.create({ ...creq, tool_choice: { type: 'function',
      function: { name: 'g' } }, tools: [{ type: 'function', function: { name: 'f',
        parameters: { type: 'object', properties: {} } } }] });
  } catch (e) { etools = e; }
  check(etools instanceof OpenAI.BadRequestError && etools.param === 'tool_choice.function.name',
        'a tool_choice naming no tool -> BadRequestError naming tool_choice.function.name');

  // errors come back as the library's error classes
  let e400 = null, e404 = null, e401 = null;
  try { await client.completions.create({ model: 'demo', prompt: 'x', max_tokens: -1 }); }
  catch (e) { e400 = e; }
  check(e400 instanceof OpenAI.BadRequestError && e400.status === 400 &&
        e400.param === 'max_tokens', 'bad max_tokens -> BadRequestError naming the field');
  try { await client.completions.create({ model: 'nope', prompt: 'x' }); } catch (e) { e404 = e; }
  check(e404 instanceof OpenAI.NotFoundError && e404.code === 'model_not_found',
        'unknown model -> NotFoundError model_not_found');
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  try { await bad.completions.create({ model: 'demo', prompt: 'x' }); } catch (e) { e401 = e; }
  check(e401 instanceof OpenAI.AuthenticationError, 'wrong API key -> AuthenticationError');

  // 32 concurrent streams: prompt lengths, sampling settings and seeds all differ;
  // each must equal the same request served alone
  const samplings = [
    { temperature: 0 }, { temperature: 0.7 }, { temperature: 1.0, top_p: 0.8 },
    { temperature: 1.2, top_k: 20 }, { temperature: 0.9, min_p: 0.1 },
    { temperature: 1.0, presence_penalty: 0.6, frequency_penalty: 0.4 },
    { temperature: 0.8, repetition_penalty: 1.3 }, { temperature: 1.0, logit_bias: { 101: 3, 32: -2 } },
  ];
  const reqs = [];
  for (let i = 0; i < 32; i++) {
    const plen = 1 + ((i * 37) % 150);
    const prompt = Array.from({ length: plen }, (_, j) => 32 + ((j * 7 + i * 11) % 95));
    reqs.push({ model: 'demo', prompt, max_tokens: 8 + (i % 5) * 6, seed: 1000 + i,
      ignore_eos: i % 4 !== 0, return_token_ids: true, ...samplings[i % samplings.length] });
  }
  const alone = [];
  const tAlone = Date.now();
  for (const r of reqs) alone.push(await collect(await client.completions.create({ ...r, stream: true })));
  // the 32 at once are the same work as the 32 one after the other: a limit from that pace
  const busyTimeout = Math.max(60000, 20 * (Date.now() - tAlone));
  const t0 = Date.now();
  const busy = await Promise.all(reqs.map(async (r) =>
    collect(await client.completions.create({ ...r, stream: true }, { timeout: busyTimeout }))));
  const secs = (Date.now() - t0) / 1000;
  let same = 0;
  for (let i = 0; i < 32; i++) {
    const a = alone[i].choices[0], b = busy[i].choices[0];
    if (a && b && a.text === b.text && JSON.stringify(a.ids) === JSON.stringify(b.ids) &&
        a.finish === b.finish && a.ids.length > 0) same++;
  }
  check(same === 32, `32 concurrent streams each equal the request alone (${same}/32, ${secs.toFixed(1)} s)`);
  check(busy.every((b) => b.choices[0] && b.choices[0].finish), 'every concurrent stream was read to its end');
}

await run(server, main, 'OpenAI client');
