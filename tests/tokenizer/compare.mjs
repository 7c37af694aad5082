// Compares our tokenizer (via the tok_dump driver) with the reference implementation
// (@huggingface/tokenizers) on every corpus string: ids with and without special tokens,
// decoded text, and the streaming decoder's invariants. Exits 1 on any disagreement.
// usage: node compare.mjs TOK_DUMP TOKDIR CORPUS.bin [--ours-config FILE] [--ref-json FILE] [--ref-config FILE]
//        [--roundtrip 1]  (also require decode(encode(text)) == text)
//        [--no-stream 1]  (skip the streaming check: streaming never applies clean_up_tokenization_spaces)
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Tokenizer } from '@huggingface/tokenizers';
import { readCorpus } from './corpus_io.mjs';

const [dump, tokdir, corpusPath, ...rest] = process.argv.slice(2);
const opt = {};
for (let i = 0; i < rest.length; i += 2) opt[rest[i].replace(/^--/, '')] = rest[i + 1];
const oursJson = path.join(tokdir, 'tokenizer.json');
const oursConfig = opt['ours-config'] ?? path.join(tokdir, 'tokenizer_config.json');
const ref = new Tokenizer(JSON.parse(fs.readFileSync(opt['ref-json'] ?? oursJson, 'utf8')),
                          JSON.parse(fs.readFileSync(opt['ref-config'] ?? oursConfig, 'utf8')));

const corpus = readCorpus(corpusPath);
const ours = execFileSync(dump, [oursJson, fs.existsSync(oursConfig) ? oursConfig : '-', corpusPath],
                          { maxBuffer: 1 << 30 }).toString().split('\n').filter(Boolean).map((l) => JSON.parse(l));
if (ours.length !== corpus.length) { console.error(`driver produced ${ours.length} results for ${corpus.length} strings`); process.exit(1); }
// the reference decodes bytes like TextDecoder (U+FFFD for invalid sequences; keep a BOM)
const td = new TextDecoder('utf-8', { ignoreBOM: true });
let agree = 0, streamOk = 0;
const failures = [];
corpus.forEach((bytes, i) => {
  const text = td.decode(bytes);
  const ids = ref.encode(text).ids;
  const plain = ref.encode(text, { add_special_tokens: false }).ids;
  const dec = ids.length ? ref.decode(ids) : '';
  const o = ours[i];
  const problems = [];
  if (o.error) problems.push(`error: ${o.error}`);
  else {
    if (JSON.stringify(o.ids) !== JSON.stringify(ids)) problems.push(`ids ours=${JSON.stringify(o.ids).slice(0, 300)} ref=${JSON.stringify(ids).slice(0, 300)}`);
    if (JSON.stringify(o.plain) !== JSON.stringify(plain)) problems.push('ids without special tokens differ');
    if (o.text !== dec) problems.push(`decode ours=${JSON.stringify(o.text).slice(0, 200)} ref=${JSON.stringify(dec).slice(0, 200)}`);
    if (o.stream_ok || opt['no-stream']) streamOk++; else problems.push(`stream: ${o.stream_why}`);
    if (opt.roundtrip && o.text !== text) problems.push('decode(encode(text)) is not the text');
  }
  if (problems.length) failures.push(`#${i} ${JSON.stringify(text).slice(0, 120)}\n    ${problems.join('\n    ')}`);
  else agree++;
});
console.log(`${path.basename(tokdir)}: ${agree}/${corpus.length} strings agree with the reference (ids, ids without specials, decode); streaming ok for ${streamOk}`);
if (failures.length) {
  console.log(failures.slice(0, 15).join('\n'));
  process.exit(1);
}
