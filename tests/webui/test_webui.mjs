// The playground (GET /) in a real browser: Debian's headless Chromium, driven by
// playwright-core, against mhla-server on the demo model.
//   - the page loads with no console error and no page error, under its CSP;
//   - a completion streams: the output grows over several observations before the request
//     ends, and its tokens are coloured by probability with the alternatives on hover;
//   - Stop during a long completion cancels it on the server (/metrics counts the cancel,
//     and so does the page's own metrics panel);
//   - the metrics charts gain points between polls, and output tokens/s showed the work;
//   - chat mode sends a turn and shows the assistant's reply;
//   - with --api-key the key field appears, a wrong key shows an error on the page, the
//     right one works.
// A screenshot of the page is kept as the test's artifact (its path is printed).
//
// usage: node test_webui.mjs BIN_DIR WORK_DIR MODEL_DIR SCREENSHOT_PNG
// Exits 77 (ctest's SKIP_RETURN_CODE) when no Chromium is installed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const SKIP = 77;
const CHROMIUM = process.env.MHLA_CHROMIUM || '/usr/bin/chromium';
const [binDir, work, modelDir, shotPath] = process.argv.slice(2);
if (!binDir || !work || !modelDir || !shotPath) {
  console.error('usage: node test_webui.mjs BIN_DIR WORK_DIR MODEL_DIR SCREENSHOT_PNG');
  process.exit(2);
}
if (!fs.existsSync(CHROMIUM)) {
  console.log(`SKIP: no Chromium at ${CHROMIUM} (install Debian's chromium, as ` +
    'deploy/bootstrap-debian.sh does, or set MHLA_CHROMIUM)');
  process.exit(SKIP);
}
const { chromium } = await import('playwright-core');

const failures = [];
function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures.push(what);
}

// Limits follow the measured pace of this machine (tests/tools/pace.py's rule): the work's
// measured seconds x a generous factor, never below a floor.
const TIME_FACTOR = Number(process.env.MHLA_TEST_TIME_FACTOR || '1');
const FACTOR = 20 * TIME_FACTOR;
let perToken = 0; // seconds per generated token, measured below
const limitMs = (tokens, floorS) =>
  1000 * Math.max(floorS * TIME_FACTOR, FACTOR * tokens * perToken);

fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
const procs = [];
process.on('exit', () => { for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL'); });

// A server on a free port: resolves to its base URL once it logs "listening".
async function startServer(name, extra) {
  const log = path.join(work, name + '.log');
  const fd = fs.openSync(log, 'w');
  const p = spawn(path.join(binDir, 'mhla-server'), ['--model', modelDir, '--host', '127.0.0.1',
    '--port', '0', '--device', 'cpu', '--threads', '2', '--log-format', 'json', ...extra],
  { stdio: ['ignore', 'ignore', fd] });
  procs.push(p);
  for (;;) { // as long as it lives and loads; ctest's timeout ends a hung start
    if (p.exitCode !== null) throw new Error(name + ' exited: ' + fs.readFileSync(log, 'utf8'));
    for (const line of fs.readFileSync(log, 'utf8').split('\n')) {
      if (line.includes('"event":"listening"')) return `http://127.0.0.1:${JSON.parse(line).port}`;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function metric(base, name) {
  const text = await (await fetch(base + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : NaN;
}

// The pace: one 64-token completion, straight to the API.
async function measure(base) {
  const t0 = Date.now();
  const r = await fetch(base + '/v1/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'The', max_tokens: 64, ignore_eos: true, seed: 1 }) });
  const body = await r.json();
  check(r.ok && body.usage.completion_tokens === 64, 'the pace request generated 64 tokens');
  perToken = (Date.now() - t0) / 1000 / 64;
  console.log(`pace: ${(1 / perToken).toFixed(0)} tokens/s`);
}

// Watches #output in the page: the generated text's length at every change while a
// request runs, so that the test sees whether text arrived in pieces.
async function watchGrowth(page) {
  await page.evaluate(() => {
    window.__growth = [];
    new MutationObserver(() => {
      const gen = document.querySelector('#output .gen');
      if (gen && document.body.classList.contains('running')) {
        window.__growth.push(gen.textContent.length);
      }
    }).observe(document.querySelector('#output'),
      { childList: true, subtree: true, characterData: true });
  });
}

async function completionStreams(page) {
  await page.fill('#max_tokens', '300');
  await page.fill('#seed', '7');
  await page.fill('#prompt', 'The jury said that');
  await watchGrowth(page);
  await page.click('#send');
  await page.waitForFunction(() => /finish: /.test(document.querySelector('#status').textContent),
    null, { timeout: limitMs(300, 60) });
  const growth = await page.evaluate(() => window.__growth);
  const final = await page.evaluate(() => document.querySelector('#output .gen').textContent);
  const before = new Set(growth.filter((n) => n > 0 && n < final.length));
  check(before.size >= 2, `text streamed in: ${before.size} lengths seen before the end ` +
    `(${final.length} characters)`);
  const spans = await page.$$eval('#output .tk', (els) => els.map((e) => e.className));
  check(spans.length >= 50 && spans.every((c) => /\bp[0-4]\b/.test(c)),
    `${spans.length} tokens coloured by probability`);
  check(new Set(spans).size >= 2, 'the colours differ between tokens: ' + [...new Set(spans)]);
  const joined = await page.$$eval('#output .tk', (els) => els.map((e) => e.textContent).join(''));
  check(final.startsWith(joined) && joined.length > 0, 'the coloured tokens are the text');
  await page.hover('#output .tk:nth-child(3)');
  const rows = await page.$$eval('#tip:not(.hidden) .tip-row', (els) => els.length);
  check(rows >= 5, `hovering a token shows its alternatives (${rows} rows)`);
}

// Requests straight to the API that keep the engine busy (and the charts lively) while the
// page streams, so that its stream lasts long enough to be stopped on any machine. They
// run to their length: only the page's request is cancelled.
function background(base, n, tokens) {
  return Array.from({ length: n }, (_, i) => fetch(base + '/v1/completions', { method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'In the year', max_tokens: tokens, ignore_eos: true,
      seed: 100 + i }) }).then((r) => r.json()));
}

async function stopCancels(page, base) {
  const key = 'mhla_requests_finished_total{reason="cancelled"}';
  const before = await metric(base, key);
  const load = background(base, 4, 2000); // longer than a poll interval: the charts see it
  await page.click('#clear');
  await page.fill('#max_tokens', '2000');
  await page.check('#ignore_eos'); // no end of text before Stop
  await page.fill('#prompt', 'It was');
  // the mouse goes to Stop as soon as text shows: a real click, without the waits of
  // page.click() (which a page busy drawing a fast stream would stretch)
  const box = await page.locator('#stop').boundingBox();
  await page.click('#send');
  await page.waitForFunction(() => document.querySelector('#output .gen').textContent.length > 0,
    null, { timeout: limitMs(64, 60), polling: 10 });
  const running = await page.$eval('#stop', (b) => !b.disabled);
  check(running, 'the long request still runs when Stop is clicked');
  if (!running) return;
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await page.waitForFunction(() => !document.body.classList.contains('running'), null,
    { timeout: limitMs(2000, 60) });
  const status = await page.textContent('#status');
  check(/stopped/.test(status), `the page says the request stopped (${status})`);
  let after = before;
  const deadline = Date.now() + limitMs(2000, 30);
  while (after <= before && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    after = await metric(base, key);
  }
  await page.uncheck('#ignore_eos');
  const done = await Promise.all(load);
  check(done.every((b) => b.choices && b.choices[0].finish_reason === 'length'),
    'the other requests ran to their length');
  after = await metric(base, key);
  check(after === before + 1, `/metrics counts the cancel (${before} -> ${after})`);
  const streams = fs.readFileSync(path.join(work, 'plain.log'), 'utf8').split('\n')
    .filter((l) => l.includes('"event":"request"') && l.includes('"stream":true'));
  check(streams.some((l) => JSON.parse(l).finish_reason === 'cancelled'),
    'the access log line of the stopped stream says cancelled');
  await page.waitForFunction((n) => new RegExp(`\\b${n} cancelled`).test(
    document.querySelector('#totals').textContent), after, { timeout: limitMs(0, 30) });
  check(true, 'the page\'s metrics panel shows the cancel');
}

async function chartsUpdate(page) {
  const pts = () => page.$eval('#chart-req', (c) => Number(c.dataset.points || 0));
  const p1 = await pts();
  await page.waitForFunction((n) => Number(document.querySelector('#chart-req').dataset.points) > n,
    p1, { timeout: limitMs(0, 30) });
  const p2 = await pts();
  check(p2 > p1, `the requests chart gained points between polls (${p1} -> ${p2})`);
  const tpsMax = await page.$eval('#chart-tps', (c) => Number(c.dataset.max || 0));
  check(tpsMax > 0, `the output tokens/s chart shows the generation (peak ${tpsMax.toFixed(1)})`);
}

async function chatTurn(page) {
  await page.click('#mode-chat');
  await page.fill('#max_tokens', '60');
  await page.fill('#seed', '7'); // a seed whose reply is not empty
  await page.fill('#prompt', 'Tell me about the city.');
  await page.click('#send');
  await page.waitForFunction(() => /finish: /.test(document.querySelector('#status').textContent),
    null, { timeout: limitMs(60, 60) });
  const msgs = await page.$$eval('#chat-log .msg', (els) => els.map((e) =>
    [e.classList.contains('user') ? 'user' : 'assistant', e.querySelector('.body').textContent]));
  check(msgs.length === 2 && msgs[0][0] === 'user' && msgs[0][1] === 'Tell me about the city.',
    'chat: the user turn is shown');
  check(msgs.length === 2 && msgs[1][0] === 'assistant' && msgs[1][1].trim().length > 0,
    `chat: the assistant's reply is shown (${JSON.stringify((msgs[1] || [])[1])})`);
  const tks = await page.$$eval('#chat-log .assistant .tk', (els) => els.length);
  check(tks > 0, `chat: the reply's tokens are coloured (${tks})`);
  await page.click('#mode-completion');
}

async function screenshot(page) {
  await page.fill('#prompt', 'The jury said that'); // the settings of the completion shown
  await page.fill('#max_tokens', '300');
  await page.evaluate(() => document.activeElement.blur());
  await page.hover('#output .tk:nth-child(12)');
  fs.mkdirSync(path.dirname(shotPath), { recursive: true });
  await page.screenshot({ path: shotPath });
  console.log('screenshot: ' + shotPath);
}

function watchErrors(page, errors) {
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push('page error: ' + e.message));
}

async function openPlain(browser, base) {
  const page = await browser.newPage({ viewport: { width: 1360, height: 860 } });
  page.setDefaultTimeout(limitMs(0, 60));
  const errors = [];
  watchErrors(page, errors);
  const resp = await page.goto(base + '/');
  const h = resp.headers();
  check(resp.status() === 200 && /^text\/html/.test(h['content-type']), 'GET / is the page');
  check(/script-src 'self'/.test(h['content-security-policy'] || ''), 'the page has its CSP');
  await page.waitForFunction(() => document.querySelector('#model-name').textContent ===
    'brown-mhla' && document.querySelector('#chart-req').dataset.points > 0);
  check(await page.$eval('#key-row', (e) => e.classList.contains('hidden')),
    'no key field on a server without --api-key');
  return { page, errors };
}

async function plainServer(browser) {
  const base = await startServer('plain', []);
  await measure(base);
  const { page, errors } = await openPlain(browser, base);
  check(errors.length === 0, 'the page loaded with no console errors ' + JSON.stringify(errors));
  await stopCancels(page, base);
  await completionStreams(page);
  await chartsUpdate(page);
  await chatTurn(page); // ends back in completion mode, its output kept for the screenshot
  await screenshot(page);
  check(errors.length === 0, 'no console errors during the session ' + JSON.stringify(errors));
  await page.close();
}

async function keyServer(browser) {
  const base = await startServer('key', ['--api-key', 'k-webui']);
  const ctx = await browser.newContext(); // its own sessionStorage
  const page = await ctx.newPage();
  page.setDefaultTimeout(limitMs(0, 60));
  const errors = [];
  watchErrors(page, errors);
  await page.goto(base + '/');
  await page.waitForSelector('#key-row:not(.hidden)');
  check(true, 'with --api-key the key field appears');
  await page.fill('#api-key', 'wrong');
  await page.click('#key-save');
  await page.waitForSelector('#error:not(.hidden)');
  const err = await page.textContent('#error');
  check(/401/.test(err) && /API key/i.test(err), 'a wrong key shows an error: ' + err);
  await page.fill('#api-key', 'k-webui');
  await page.click('#key-save');
  await page.waitForFunction(() => document.querySelector('#model-name').textContent ===
    'brown-mhla' && document.querySelector('#error').classList.contains('hidden'));
  await page.fill('#max_tokens', '20');
  await page.fill('#prompt', 'The');
  await page.click('#send');
  await page.waitForFunction(() => /finish: /.test(document.querySelector('#status').textContent),
    null, { timeout: limitMs(20, 60) });
  check((await page.textContent('#output .gen')).length > 0, 'the right key works: text came');
  const stored = await page.evaluate(() => [sessionStorage.getItem('mhla-api-key'),
    localStorage.length]);
  check(stored[0] === 'k-webui' && stored[1] === 0, 'the key is kept in sessionStorage only');
  const other = errors.filter((e) => !/status of 401/.test(e));
  check(other.length === 0, 'no errors but the expected 401s ' + JSON.stringify(other));
  await ctx.close();
}

let browser;
try {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  await plainServer(browser);
  await keyServer(browser);
} catch (e) {
  console.log(e.stack || String(e));
  failures.push('exception: ' + e.message);
} finally {
  if (browser) await browser.close();
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
}
if (failures.length) {
  console.log(`${failures.length} FAILED:\n  ` + failures.join('\n  '));
  console.log(`the servers' logs: ${work}/plain.log, ${work}/key.log`);
  process.exit(1);
}
console.log('all playground checks passed');
