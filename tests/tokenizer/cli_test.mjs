// Checks the mhla-tokenize CLI end to end against the reference on a sample of the
// corpus: `encode` (default and --no-special) output format and ids, and `decode` bytes.
// usage: node cli_test.mjs MHLA_TOKENIZE DATADIR
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Tokenizer } from '@huggingface/tokenizers';
import { readCorpus } from './corpus_io.mjs';

const [cli, data] = process.argv.slice(2);
const corpus = readCorpus(path.join(data, 'corpus.bin'));
// every process loads the vocabulary, so keep the sample small (the bulk of the corpus goes
// through tok_dump in compare.mjs)
const sample = corpus.filter((_, i) => i % 40 === 0 || (i >= corpus.length - 40 && i % 8 === 0));
const td = new TextDecoder('utf-8', { ignoreBOM: true });
let checked = 0, bad = 0;
const run = (args, input) => {
  const r = spawnSync(cli, args, { input, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`${cli} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
};
for (const name of ['gpt2', 'llama2', 'llama3', 'qwen2']) {
  const dir = path.join(data, name);
  const file = path.join(dir, 'tokenizer.json');
  const ref = new Tokenizer(JSON.parse(fs.readFileSync(file, 'utf8')),
                            JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')));
  for (const bytes of name.startsWith('gpt2') || name === 'llama2' ? sample : sample.slice(-6)) {
    const text = td.decode(bytes);
    const want = ref.encode(text).ids;
    const wantPlain = ref.encode(text, { add_special_tokens: false }).ids;
    const got = run(['encode', '--tokenizer', file], bytes).toString();
    const gotPlain = run(['encode', '--tokenizer', file, '--no-special'], bytes).toString();
    const dec = run(['decode', '--tokenizer', file], Buffer.from(got));
    const wantDec = Buffer.from(want.length ? ref.decode(want) : '', 'utf8');
    checked++;
    const problems = [];
    if (got !== want.join(' ') + '\n') problems.push(`encode: got ${JSON.stringify(got.slice(0, 200))} want ${JSON.stringify(want.join(' ').slice(0, 200))}`);
    if (gotPlain !== wantPlain.join(' ') + '\n') problems.push('encode --no-special differs');
    if (!dec.equals(wantDec)) problems.push(`decode: got ${JSON.stringify(dec.toString().slice(0, 100))} want ${JSON.stringify(wantDec.toString().slice(0, 100))}`);
    if (problems.length) { bad++; console.log(`${name} ${JSON.stringify(text).slice(0, 80)}\n  ${problems.join('\n  ')}`); }
  }
}
// errors are reported, not crashed on
const e1 = spawnSync(cli, ['decode', '--tokenizer', path.join(data, 'gpt2', 'tokenizer.json')], { input: '1 2 99999999\n' });
const e2 = spawnSync(cli, ['encode', '--tokenizer', path.join(data, 'no-such-file.json')], { input: 'x' });
const e3 = spawnSync(cli, ['decode', '--tokenizer', path.join(data, 'gpt2', 'tokenizer.json')], { input: '1 two 3' });
for (const [what, r] of [['unknown id', e1], ['missing file', e2], ['non-numeric id', e3]]) {
  if (r.status !== 1 || !/mhla-tokenize: /.test(r.stderr.toString())) { bad++; console.log(`${what}: expected exit 1 with a message, got ${r.status} ${r.stderr}`); }
}
console.log(`cli: ${checked - bad}/${checked} encode/decode round trips agree with the reference`);
process.exit(bad ? 1 : 0);
