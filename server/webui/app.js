// The mhla-serve playground: completion and chat against this server's own API, streamed,
// each token coloured by the model's probability (its alternatives on hover), and live
// charts drawn from GET /metrics. No framework, no build step: the server embeds this file.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY_STORE = 'mhla-api-key'; // sessionStorage only: gone when the tab closes

const state = {
  mode: 'completion',
  key: sessionStorage.getItem(KEY_STORE) || '',
  model: null,
  busy: null, // the AbortController of the request in flight
  chat: [], // {role, content} of the conversation so far
  status: { completion: '', chat: '' },
};

// ---- API calls ---------------------------------------------------------------------------

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (state.key) h.Authorization = 'Bearer ' + state.key;
  return h;
}

// An error answer's message: the OpenAI shape when the body has it.
async function errorText(resp) {
  let msg = resp.status + ' ' + resp.statusText;
  try {
    const body = await resp.json();
    if (body && body.error && body.error.message) msg = resp.status + ': ' + body.error.message;
  } catch (e) { /* not JSON: the status line says enough */ }
  if (resp.status === 401) msg += ' — enter the server\'s API key at the top right.';
  return msg;
}

function showError(msg) {
  const el = $('error');
  el.textContent = msg;
  el.classList.toggle('hidden', !msg);
}

// Each mode keeps its own status line (the last request's tokens, speed, end).
function setStatus(text, mode) {
  state.status[mode || state.mode] = text;
  if (!mode || mode === state.mode) $('status').textContent = text;
}

// /v1/models tells whether the server wants a key (401) and which model it serves.
async function connect() {
  let resp;
  try {
    resp = await fetch('/v1/models', { headers: headers(false) });
  } catch (e) {
    $('model-name').textContent = 'server unreachable';
    return;
  }
  if (resp.status === 401) {
    $('key-row').classList.remove('hidden');
    $('model-name').textContent = 'API key required';
    if (state.key) showError(await errorText(resp));
    $('api-key').focus();
    return;
  }
  if (!resp.ok) {
    showError(await errorText(resp));
    return;
  }
  const body = await resp.json();
  state.model = body.data && body.data[0];
  if (state.model) {
    $('model-name').textContent = state.model.id;
    $('model-name').title = 'context: ' + state.model.max_model_len + ' tokens, vocabulary: ' +
      state.model.vocab_size;
  }
  if (state.key) $('key-row').classList.remove('hidden'); // a key in use stays changeable
  showError('');
}

async function loadVersion() {
  try {
    const resp = await fetch('/version');
    if (resp.ok) $('version').textContent = 'v' + (await resp.json()).version;
  } catch (e) { /* the header simply shows no version */ }
}

// ---- the request's body ------------------------------------------------------------------

function num(id) {
  const v = $(id).value.trim();
  return v === '' ? null : Number(v);
}

// "a, b, \n" -> ["a", "b", "\n"]: commas split, \n and \t are the characters, \, a comma.
function stopList() {
  const raw = $('stop-seq').value;
  if (!raw.trim()) return null;
  const out = [];
  let cur = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\\' && i + 1 < raw.length) {
      const n = raw[++i];
      cur += n === 'n' ? '\n' : n === 't' ? '\t' : n;
    } else if (c === ',') {
      out.push(cur.trim() ? cur.replace(/^ +| +$/g, '') : cur);
      cur = '';
    } else {
      cur += c;
    }
  }
  out.push(cur.trim() ? cur.replace(/^ +| +$/g, '') : cur);
  const list = out.filter((s) => s.length > 0);
  return list.length ? list.slice(0, 4) : null;
}

function sampling() {
  const p = {
    temperature: num('temperature'),
    top_p: num('top_p'),
    max_tokens: num('max_tokens'),
    stream: true,
    stream_options: { include_usage: true },
  };
  const topK = num('top_k');
  if (topK) p.top_k = topK;
  const seed = num('seed');
  if (seed !== null) p.seed = seed;
  if ($('ignore_eos').checked) p.ignore_eos = true;
  const stop = stopList();
  if (stop) p.stop = stop;
  return p;
}

// ---- tokens, coloured ---------------------------------------------------------------------

// One generated text being shown: its characters (code points) and its tokens, each with
// the character it starts at, its probability and its alternatives.
class TokenView {
  constructor(el) {
    this.el = el;
    this.chars = [];
    this.toks = [];
    this.shown = 0; // tokens already drawn as spans
    this.pos = 0; // characters already inside them
    this.tail = document.createTextNode('');
    el.appendChild(this.tail);
  }

  addText(text) { if (text) this.chars.push(...Array.from(text)); }

  addToken(start, text, logprob, top) { this.toks.push({ start, text, logprob, top }); }

  // Draws the tokens whose text has all arrived (the next token's start is in); with last,
  // all of them. The text past them stays plain until then.
  render(last) {
    const n = this.chars.length;
    while (this.shown < this.toks.length) {
      const next = this.toks[this.shown + 1];
      if (next ? next.start > n : !last) break;
      const end = next ? next.start : n;
      if (end > this.pos) {
        this.el.insertBefore(this.span(this.shown, this.pos, end), this.tail);
        this.pos = end;
      }
      this.shown++;
    }
    this.tail.data = this.chars.slice(this.pos).join('');
    follow(this.el.closest('.output'));
  }

  span(i, from, end) {
    const t = this.toks[i];
    const s = document.createElement('span');
    const p = Math.exp(t.logprob);
    s.className = 'tk p' + (p >= 0.6 ? 4 : p >= 0.3 ? 3 : p >= 0.1 ? 2 : p >= 0.03 ? 1 : 0);
    s.textContent = this.chars.slice(from, end).join('');
    s.tokenInfo = t;
    return s;
  }
}

// An output box follows its text while the reader is at its bottom (and stays where they
// scrolled to otherwise): once a frame, so that a fast stream does not force a layout for
// every chunk.
function follow(box) {
  if (!box || !box.stick || box.pending) return;
  box.pending = requestAnimationFrame(() => {
    box.pending = 0;
    box.scrollTop = box.scrollHeight;
  });
}

function watchScroll(box) {
  box.stick = true;
  box.addEventListener('scroll', () => {
    box.stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  });
}

// Shown whitespace of a token in the tooltip: a space as ·, a newline as ↵.
function visible(text) {
  return text.replace(/ /g, '·').replace(/\n/g, '↵').replace(/\t/g, '→') || '∅';
}

function showTip(ev) {
  const s = ev.target.closest && ev.target.closest('.tk');
  const tip = $('tip');
  if (!s || !s.tokenInfo) {
    tip.classList.add('hidden');
    return;
  }
  const t = s.tokenInfo;
  tip.textContent = '';
  const head = document.createElement('div');
  head.className = 'tip-head';
  const tok = document.createElement('span');
  tok.className = 'tip-chosen';
  tok.textContent = visible(t.text);
  const pct = document.createElement('span');
  pct.textContent = (100 * Math.exp(t.logprob)).toFixed(1) + '%';
  head.append(tok, pct);
  tip.appendChild(head);
  const best = t.top.length ? Math.exp(t.top[0][1]) : 1;
  for (const [tok, lp] of t.top) {
    const row = document.createElement('div');
    row.className = 'tip-row' + (tok === t.text ? ' chosen' : '');
    const bar = document.createElement('span');
    bar.className = 'tip-bar';
    bar.style.width = Math.max(2, Math.round(48 * Math.exp(lp) / best)) + 'px'; // the best: full
    const name = document.createElement('span');
    name.className = 'tip-tok';
    name.textContent = visible(tok);
    const pct = document.createElement('span');
    pct.className = 'tip-pct';
    pct.textContent = (100 * Math.exp(lp)).toFixed(1) + '%';
    const track = document.createElement('span');
    track.className = 'tip-track';
    track.appendChild(bar);
    row.append(name, pct, track);
    tip.appendChild(row);
  }
  const r = s.getBoundingClientRect();
  tip.classList.remove('hidden');
  const w = tip.offsetWidth;
  tip.style.left = Math.max(4, Math.min(window.innerWidth - w - 4, r.left)) + 'px';
  tip.style.top = (r.bottom + 6 + window.scrollY) + 'px';
}

// ---- streaming ----------------------------------------------------------------------------

// POSTs body to path and calls onChunk with each event's JSON until [DONE].
async function stream(path, body, onChunk, signal) {
  const resp = await fetch(path, {
    method: 'POST', headers: headers(true), body: JSON.stringify(body), signal,
  });
  if (!resp.ok) throw new Error(await errorText(resp));
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        const obj = JSON.parse(data);
        if (obj.error) throw new Error('the server ended the stream: ' + obj.error.message);
        onChunk(obj);
      }
    }
  }
}

// Legacy logprobs of one completion chunk into the view.
function addCompletionChunk(view, c) {
  view.addText(c.text);
  const lp = c.logprobs;
  if (!lp || !lp.tokens) return;
  for (let i = 0; i < lp.tokens.length; i++) {
    if (lp.token_logprobs[i] === null) continue;
    const top = Object.entries(lp.top_logprobs[i] || {}).sort((a, b) => b[1] - a[1]);
    view.addToken(lp.text_offset[i], lp.tokens[i], lp.token_logprobs[i], top);
  }
}

// Chat logprobs carry each token's bytes: the characters they complete, counted as they
// come, give where each token starts in the text (a token that ends inside a character
// leaves it to the token that completes it).
class ChatOffsets {
  constructor() {
    this.dec = new TextDecoder();
    this.count = 0;
  }

  startOf(tokBytes) {
    const start = this.count;
    this.count += Array.from(this.dec.decode(new Uint8Array(tokBytes), { stream: true })).length;
    return start;
  }
}

function addChatChunk(view, offs, c) {
  view.addText(c.delta && c.delta.content);
  const lp = c.logprobs && c.logprobs.content;
  if (!lp) return;
  for (const t of lp) {
    const bytes = t.bytes || Array.from(new TextEncoder().encode(t.token));
    const top = (t.top_logprobs || []).map((a) => [a.token, a.logprob]);
    view.addToken(offs.startOf(bytes), t.token, t.logprob, top);
  }
}

function busy(ctrl) {
  state.busy = ctrl;
  $('send').disabled = !!ctrl;
  $('stop').disabled = !ctrl;
  document.body.classList.toggle('running', !!ctrl);
}

// Runs one request: streams into view, keeps the status line, ends the view.
async function run(path, body, onChunk, view) {
  const mode = state.mode;
  const ctrl = new AbortController();
  busy(ctrl);
  showError('');
  const t0 = performance.now();
  let usage = null, finish = null, first = null, n = 0;
  setStatus('waiting…', mode);
  try {
    await stream(path, body, (obj) => {
      if (obj.usage) usage = obj.usage;
      for (const c of obj.choices || []) {
        if (first === null) first = performance.now();
        n++;
        onChunk(c);
        if (c.finish_reason) finish = c.finish_reason;
      }
      view.render(false);
      if (n % 8 === 0) setStatus('streaming…', mode);
    }, ctrl.signal);
    setStatus(finishStatus(usage, finish, t0, first), mode);
  } catch (e) {
    if (e.name === 'AbortError') setStatus('stopped: the server cancelled the request', mode);
    else {
      showError(e.message);
      setStatus('', mode);
    }
  } finally {
    view.render(true);
    busy(null);
  }
}

function finishStatus(usage, finish, t0, first) {
  const parts = [];
  const n = usage ? usage.completion_tokens : 0;
  if (usage) parts.push(n + (n === 1 ? ' token' : ' tokens'));
  const t1 = performance.now();
  if (n > 1 && first !== null && t1 > first) {
    parts.push((1000 * (n - 1) / (t1 - first)).toFixed(1) + ' tokens/s');
  }
  if (first !== null) parts.push('first token ' + Math.round(first - t0) + ' ms');
  if (finish) parts.push('finish: ' + finish);
  return parts.join(' · ');
}

function completion() {
  const prompt = $('prompt').value;
  if (!prompt) return;
  const out = $('output');
  out.textContent = '';
  const p = document.createElement('span');
  p.className = 'prompt-text';
  p.textContent = prompt;
  out.appendChild(p);
  const gen = document.createElement('span');
  gen.className = 'gen';
  out.appendChild(gen);
  const view = new TokenView(gen);
  const body = Object.assign({ prompt, logprobs: num('alternatives') || 0 }, sampling());
  if (state.model) body.model = state.model.id;
  return run('/v1/completions', body, (c) => addCompletionChunk(view, c), view);
}

function bubble(role, text) {
  const log = $('chat-log');
  const ph = log.querySelector('.placeholder');
  if (ph) ph.remove();
  const b = document.createElement('div');
  b.className = 'msg ' + role;
  const who = document.createElement('div');
  who.className = 'who';
  who.textContent = role;
  const body = document.createElement('div');
  body.className = 'body';
  body.textContent = text;
  b.append(who, body);
  log.appendChild(b);
  log.stick = true; // a new message: back to the bottom
  follow(log);
  return body;
}

async function chat() {
  const text = $('prompt').value;
  if (!text) return;
  $('prompt').value = '';
  state.chat.push({ role: 'user', content: text });
  bubble('user', text);
  const el = bubble('assistant', '');
  const view = new TokenView(el);
  const offs = new ChatOffsets();
  const sys = $('system').value.trim();
  const messages = (sys ? [{ role: 'system', content: sys }] : []).concat(state.chat);
  const alt = num('alternatives') || 0;
  const body = Object.assign({ messages, logprobs: true, top_logprobs: alt }, sampling());
  if (state.model) body.model = state.model.id;
  await run('/v1/chat/completions', body, (c) => addChatChunk(view, offs, c), view);
  const reply = view.chars.join('');
  if (reply) state.chat.push({ role: 'assistant', content: reply });
  else {
    state.chat.pop(); // nothing came back: the turn can be sent again
    el.parentElement.classList.add('failed');
  }
}

function send() {
  if (state.busy) return;
  return state.mode === 'chat' ? chat() : completion();
}

function setMode(mode) {
  state.mode = mode;
  for (const m of ['completion', 'chat']) {
    $('mode-' + m).classList.toggle('active', m === mode);
    $('mode-' + m).setAttribute('aria-selected', String(m === mode));
  }
  $('status').textContent = state.status[mode];
  $('completion-view').classList.toggle('hidden', mode !== 'completion');
  $('chat-view').classList.toggle('hidden', mode !== 'chat');
  $('prompt').placeholder = mode === 'chat' ? 'Message…  (Ctrl+Enter sends)'
    : 'Write a prompt…  (Ctrl+Enter sends)';
}

function clearAll() {
  if (state.mode === 'chat') {
    state.chat = [];
    $('chat-log').textContent = '';
  } else {
    $('output').textContent = '';
  }
  setStatus('');
  showError('');
}

// ---- metrics --------------------------------------------------------------------------------

const WINDOW_S = 300;
const POLL_MS = 2000;

// Prometheus text: "name{labels} value" lines into a map (comments skipped).
function parseMetrics(text) {
  const m = new Map();
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const sp = line.lastIndexOf(' ');
    if (sp > 0) m.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return m;
}

function formatBytes(b) {
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(2) + ' GiB';
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + ' MiB';
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + ' KiB';
  return Math.round(b) + ' B';
}

// A small line chart over the last WINDOW_S seconds: one or two series of [t, v] points.
class Chart {
  constructor(canvas, colors, fixedMax) {
    this.c = canvas;
    this.colors = colors;
    this.fixedMax = fixedMax;
    this.series = colors.map(() => []);
  }

  push(t, values) {
    values.forEach((v, i) => { if (v !== null && isFinite(v)) this.series[i].push([t, v]); });
    for (const s of this.series) while (s.length && s[0][0] < t - WINDOW_S * 1000) s.shift();
    this.c.dataset.points = String(this.series[0].length);
    this.c.dataset.max = String(this.series[0].reduce((m, p) => Math.max(m, p[1]), 0));
  }

  // The x axis spans the last WINDOW_S seconds, or less (at least a minute) while the page
  // has been open for less: the charts fill from the start instead of hugging the edge.
  draw(now, since) {
    const span = Math.max(60000, Math.min(WINDOW_S * 1000, now - since));
    const dpr = window.devicePixelRatio || 1;
    const w = this.c.clientWidth, h = this.c.clientHeight;
    if (this.c.width !== w * dpr) {
      this.c.width = w * dpr;
      this.c.height = h * dpr;
    }
    const g = this.c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    if (!this.series.some((s) => s.length)) {
      g.fillStyle = '#9ca3af';
      g.font = '11px system-ui, sans-serif';
      g.textAlign = 'center';
      g.fillText(this.empty || 'no data yet', w / 2, h / 2 + 4);
      return;
    }
    let max = this.fixedMax || 0;
    for (const s of this.series) for (const [, v] of s) max = Math.max(max, v);
    max = max > 0 ? max * 1.15 : 1;
    g.strokeStyle = '#e5e7eb';
    g.lineWidth = 1;
    for (const f of [0.5, 1]) { // grid at half and full height
      g.beginPath();
      g.moveTo(0, Math.round(h * f) - 0.5);
      g.lineTo(w, Math.round(h * f) - 0.5);
      g.stroke();
    }
    const x = (t) => (w - 3) * (1 - (now - t) / span); // room for the latest value's dot
    const y = (v) => h - 2 - (v / max) * (h - 6);
    this.series.forEach((s, i) => this.line(g, s, x, y, this.colors[i], h, i === 0));
    if (this.fmt) { // the scale: the value at the half-height line
      g.fillStyle = '#9ca3af';
      g.font = '10px system-ui, sans-serif';
      g.textAlign = 'left';
      g.fillText(this.fmt(max * (h / 2 - 2) / (h - 6)), 3, Math.round(h / 2) - 3);
    }
  }

  line(g, s, x, y, color, h, fill) {
    if (!s.length) return;
    g.beginPath();
    s.forEach(([t, v], k) => (k ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.stroke();
    const [lt, lv] = s[s.length - 1]; // the latest value as a dot: a lone point shows too
    g.beginPath();
    g.arc(x(lt), y(lv), 2.5, 0, 2 * Math.PI);
    g.fillStyle = color;
    g.fill();
    if (!fill) return;
    g.beginPath();
    s.forEach(([t, v], k) => (k ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
    g.lineTo(x(s[s.length - 1][0]), h);
    g.lineTo(x(s[0][0]), h);
    g.closePath();
    g.fillStyle = color + '22';
    g.fill();
  }
}

const charts = {};
let last = null; // the previous poll's counters, for rates
let firstPoll = 0; // when the first poll came back

function metricSample(m, t) {
  const get = (k) => (m.has(k) ? m.get(k) : null);
  const s = {
    t,
    gen: get('mhla_generation_tokens_total'),
    running: get('mhla_requests_running'),
    waiting: get('mhla_requests_waiting'),
    hits: get('mhla_prefix_cache_hits_total'),
    misses: get('mhla_prefix_cache_misses_total'),
    cancelled: get('mhla_requests_finished_total{reason="cancelled"}'),
  };
  const used = get('mhla_state_pages{kind="used"}'), page = get('mhla_state_page_bytes');
  const cached = get('mhla_state_pages{kind="cached"}'), total = get('mhla_state_pages{kind="total"}');
  // with a pool: its pages that hold state, running or cached for reuse (their share of the
  // pool as the percentage); without one: the live sequences' state
  s.mem = used !== null && page !== null ? (used + cached) * page : get('mhla_state_bytes');
  s.share = total ? (used + cached) / total : null;
  let done = 0;
  for (const [k, v] of m) if (k.startsWith('mhla_requests_finished_total')) done += v;
  s.finished = done;
  return s;
}

function updateCharts(s) {
  if (!firstPoll) firstPoll = s.t;
  let tps = null, hit = null;
  if (last && s.t > last.t) {
    tps = Math.max(0, (s.gen - last.gen) / ((s.t - last.t) / 1000));
    const dh = s.hits - last.hits, dm = s.misses - last.misses;
    if (s.hits !== null && dh + dm > 0) hit = dh / (dh + dm);
  }
  if (last) charts.tps.push(s.t, [tps]);
  charts.req.push(s.t, [s.running, s.waiting]);
  charts.mem.push(s.t, [s.mem]);
  if (hit !== null) charts.hit.push(s.t, [hit]);
  $('v-tps').textContent = tps === null ? '–' : tps.toFixed(1);
  $('v-req').textContent = s.running + ' / ' + s.waiting;
  $('v-mem').textContent = s.mem === null ? '–' : formatBytes(s.mem) +
    (s.share === null ? '' : ' · ' + (s.share > 0 && s.share < 0.001 ? '<0.1'
      : (100 * s.share).toFixed(s.share < 0.1 ? 1 : 0)) + '%');
  const all = s.hits + s.misses;
  $('v-hit').textContent = s.hits === null ? 'off' : all ? Math.round(100 * s.hits / all) + '%' : '–';
  $('totals').textContent = s.finished + ' requests finished · ' + (s.cancelled || 0) +
    ' cancelled';
  last = s;
  for (const c of Object.values(charts)) c.draw(s.t, firstPoll);
}

async function pollMetrics() {
  try {
    const resp = await fetch('/metrics', { headers: headers(false) });
    $('health').className = 'dot ' + (resp.ok ? 'ok' : 'bad');
    if (resp.ok) updateCharts(metricSample(parseMetrics(await resp.text()), Date.now()));
  } catch (e) {
    $('health').className = 'dot bad';
  }
  setTimeout(pollMetrics, POLL_MS);
}

// ---- wiring ----------------------------------------------------------------------------------

function init() {
  charts.tps = new Chart($('chart-tps'), ['#2563eb']);
  charts.req = new Chart($('chart-req'), ['#059669', '#d97706']);
  charts.mem = new Chart($('chart-mem'), ['#7c3aed']);
  charts.hit = new Chart($('chart-hit'), ['#0891b2'], 1);
  charts.hit.empty = 'no prefix lookups yet';
  charts.tps.fmt = (v) => v.toFixed(v < 10 ? 1 : 0);
  charts.req.fmt = (v) => v.toFixed(1);
  charts.mem.fmt = formatBytes;
  charts.hit.fmt = (v) => Math.round(100 * v) + '%';
  for (const id of ['temperature', 'top_p']) {
    $(id).addEventListener('input', () => { $(id + '-v').textContent = $(id).value; });
  }
  $('mode-completion').addEventListener('click', () => setMode('completion'));
  $('mode-chat').addEventListener('click', () => setMode('chat'));
  $('send').addEventListener('click', send);
  $('stop').addEventListener('click', () => state.busy && state.busy.abort());
  $('clear').addEventListener('click', clearAll);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send();
  });
  $('key-row').addEventListener('submit', (e) => {
    e.preventDefault();
    state.key = $('api-key').value.trim();
    if (state.key) sessionStorage.setItem(KEY_STORE, state.key);
    else sessionStorage.removeItem(KEY_STORE);
    connect();
  });
  $('api-key').value = state.key;
  watchScroll($('output'));
  watchScroll($('chat-log'));
  document.addEventListener('mouseover', showTip);
  window.addEventListener('resize', () => last && Object.values(charts).forEach((c) => c.draw(last.t, firstPoll)));
  connect();
  loadVersion();
  pollMetrics();
}

init();
