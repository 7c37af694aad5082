// Builds small tokenizer.json variants from the real vocabularies that exercise the other
// supported components (normalizers, pre-tokenizers, Split behaviours, Metaspace, added
// token options, templates and tokenizer_config flags, clean-up), and compares each with
// the reference on part of the corpus plus strings aimed at the variant.
// usage: node components_test.mjs TOK_DUMP DATADIR
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { readCorpus } from './corpus_io.mjs';

const [dump, data] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const load = (n) => JSON.parse(fs.readFileSync(path.join(data, n, 'tokenizer.json'), 'utf8'));
const gpt2 = load('gpt2'), llama2 = load('llama2');
const dir = path.join(data, 'components');
fs.mkdirSync(dir, { recursive: true });

const corpus = readCorpus(path.join(data, 'corpus.bin')).filter((_, i) => i % 3 === 0);
const extra = ['<|user|>  hi there  <|user|>x', ' <|user|> ', 'hello world and hello worldly', 'say hello world',
  'a1b22c333', 'one, two. three!', 'x  y   z', '  lead', 'trail  ', 'İI Σ ΟΔΟΣ.', 'A  B\tC', "don 't ,like . this"]
  .map((s) => Buffer.from(s, 'utf8'));
const parts = [];
for (const b of [...corpus, ...extra]) parts.push(Buffer.from(`${b.length}\n`), b, Buffer.from('\n'));
const corpusFile = path.join(dir, 'corpus.bin');
fs.writeFileSync(corpusFile, Buffer.concat(parts));

const BL = (o = {}) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true, ...o });
const seq = (...p) => ({ type: 'Sequence', pretokenizers: p });
const split = (pattern, behavior, invert = false) => ({ type: 'Split', pattern, behavior, invert });
const noConfig = { clean_up_tokenization_spaces: false };
const userTok = { id: 32000, content: '<|user|>', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true };
const hwTok = { id: 32001, content: 'hello world', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false };

const variants = [
  ['norm_nfkc_lower_strip', { ...gpt2, normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' },
    { type: 'Strip', strip_left: true, strip_right: true }] } }],
  ['norm_nfd_accents_replace', { ...gpt2, normalizer: { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' },
    { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' }, { type: 'NFKD' }] } }],
  ['pre_digits_punct_prefix', { ...gpt2, pre_tokenizer: seq({ type: 'Digits', individual_digits: true }, { type: 'Punctuation', behavior: 'Isolated' },
    BL({ add_prefix_space: true })) }],
  ['pre_whitespace', { ...gpt2, pre_tokenizer: seq({ type: 'Whitespace' }, BL({ use_regex: false })) }],
  ['pre_wsplit_digits', { ...gpt2, pre_tokenizer: seq({ type: 'WhitespaceSplit' }, { type: 'Digits', individual_digits: false }, BL({ use_regex: false })) }],
  ['split_removed_string', { ...gpt2, pre_tokenizer: seq(split({ String: ' ' }, 'Removed'), BL({ use_regex: false })) }],
  ['split_removed_regex', { ...gpt2, pre_tokenizer: seq(split({ Regex: '\\s+|[,.]' }, 'Removed'), BL({ use_regex: false })) }],
  ['split_invert', { ...gpt2, pre_tokenizer: seq(split({ Regex: '\\p{L}+|\\p{N}+' }, 'Removed', true), BL({ use_regex: false })) }],
  ['split_merged_previous', { ...gpt2, pre_tokenizer: seq(split({ Regex: '\\d+|\\b' }, 'MergedWithPrevious'), BL({ use_regex: false })) }],
  ['split_contiguous_word', { ...gpt2, pre_tokenizer: seq(split({ Regex: "(?i:'s|'t)|\\w+|\\W" }, 'Contiguous'), BL({ use_regex: false })) }],
  ['llama2_metaspace_first', { ...llama2, normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false }] } }],
  ['llama2_metaspace_always', { ...llama2, normalizer: { type: 'NFKC' },
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' },
      { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 2, stop: 1 }] } }],
  ['llama2_added_options', { ...llama2, added_tokens: [...llama2.added_tokens, userTok, hwTok] }],
  ['gpt2_added_options', { ...gpt2, added_tokens: [...gpt2.added_tokens, { ...userTok, id: 50257 }, { ...hwTok, id: 50258 }] }],
];

let bad = 0;
const run = (name, json, config, extraArgs = []) => {
  const d = path.join(dir, name);
  fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(d, 'tokenizer.json'), JSON.stringify(json));
  fs.writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(config));
  const r = spawnSync(process.execPath, [path.join(here, 'compare.mjs'), dump, d, corpusFile, ...extraArgs], { encoding: 'utf8' });
  process.stdout.write(r.stdout.split('\n').slice(0, 8).join('\n') + '\n');
  if (r.status !== 0) { bad++; process.stdout.write(r.stderr); }
};
for (const [name, json] of variants) run(name, json, noConfig);
// add_bos_token / add_eos_token from tokenizer_config.json: the reference is given the
// equivalent TemplateProcessing, ours the original file plus the flags
{
  const d = path.join(dir, 'llama2_bos_eos_ref');
  fs.mkdirSync(d, { recursive: true });
  const ref = { ...llama2, post_processor: { ...llama2.post_processor,
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }] } };
  fs.writeFileSync(path.join(d, 'tokenizer.json'), JSON.stringify(ref));
  fs.writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(noConfig));
  const oursCfg = path.join(d, 'ours_config.json');
  fs.writeFileSync(oursCfg, JSON.stringify({ ...noConfig, add_bos_token: true, add_eos_token: true, bos_token: '<s>', eos_token: '</s>' }));
  run('llama2_add_bos_eos', llama2, noConfig, ['--ours-config', oursCfg, '--ref-json', path.join(d, 'tokenizer.json'),
                                               '--ref-config', path.join(d, 'tokenizer_config.json')]);
  const noBos = path.join(d, 'nobos_config.json');
  fs.writeFileSync(noBos, JSON.stringify({ ...noConfig, add_bos_token: false, bos_token: '<s>' }));
  const refNoBos = { ...llama2, post_processor: null };
  fs.writeFileSync(path.join(d, 'nobos.json'), JSON.stringify(refNoBos));
  run('llama2_no_bos', llama2, noConfig, ['--ours-config', noBos, '--ref-json', path.join(d, 'nobos.json'),
                                          '--ref-config', path.join(d, 'tokenizer_config.json')]);
}
// clean_up_tokenization_spaces (one-shot decode only; streaming never cleans up)
run('gpt2_cleanup', gpt2, { clean_up_tokenization_spaces: true }, ['--no-stream', '1']);
console.log(bad ? `components: ${bad} variant(s) disagree` : 'components: all variants agree with the reference');
process.exit(bad ? 1 : 0);
