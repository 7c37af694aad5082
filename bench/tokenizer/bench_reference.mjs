// Encode throughput of the reference (@huggingface/tokenizers) on the same text and the
// same 64 KB newline-aligned chunks as bench_encode.c. usage: node bench_reference.mjs tokenizer.json text.txt [repeats]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.argv[1], '../../../tests/tokenizer/package.json'));
const mod = await import(require.resolve('@huggingface/tokenizers'));
const Tokenizer = mod.Tokenizer ?? mod.default.Tokenizer; // the CommonJS build arrives as default
const [file, textFile, rep = '3'] = process.argv.slice(2);
const cfgPath = path.join(path.dirname(file), 'tokenizer_config.json');
const tok = new Tokenizer(JSON.parse(fs.readFileSync(file, 'utf8')), fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {});
const buf = fs.readFileSync(textFile);
const chunks = [];
for (let off = 0; off < buf.length;) {
  let end = Math.min(off + 65536, buf.length);
  while (end < buf.length && buf[end - 1] !== 10) end++;
  chunks.push(buf.subarray(off, end).toString('utf8'));
  off = end;
}
let best = Infinity, ids = 0;
for (let r = 0; r < Number(rep); r++) {
  const t0 = process.hrtime.bigint();
  ids = 0;
  for (const c of chunks) ids += tok.encode(c, { add_special_tokens: false }).ids.length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(`reference ${(buf.length / 1e6 / best).toFixed(2)} MB/s (${buf.length} bytes, ${ids} tokens, best of ${rep}: ${best.toFixed(3)} s)`);
