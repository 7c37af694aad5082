// Builds real tokenizer.json files from the vocabularies shipped in npm packages, into
// OUTDIR/<name>/tokenizer.json (+ tokenizer_config.json):
//   gpt2    GPT-2 byte-level BPE (js-tiktoken's gpt2 ranks; merges in "a b" form)
//   llama3  cl100k_base ranks with the Llama-3 split regex and a BOS template (merges as pairs)
//   qwen2   cl100k_base ranks with the Qwen2 regex and the NFC normalizer
//   llama2  Llama-2 SentencePiece BPE (llama-tokenizer-js vocabulary): Prepend + Replace
//           normalizer, byte fallback, BOS template
// usage: node build_tokenizers.mjs OUTDIR
import fs from 'node:fs';
import path from 'node:path';
import gpt2Ranks from 'js-tiktoken/ranks/gpt2';
import cl100kRanks from 'js-tiktoken/ranks/cl100k_base';
import llamaTokenizer from 'llama-tokenizer-js';

const outdir = process.argv[2];
if (!outdir) { console.error('usage: node build_tokenizers.mjs OUTDIR'); process.exit(2); }

// GPT-2's byte -> printable character table
export function bytesToUnicode() {
  const bs = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  const m = new Array(256);
  bs.forEach((b, i) => { m[b] = String.fromCharCode(cs[i]); });
  return m;
}
const B2U = bytesToUnicode();
const enc = (bytes) => Array.from(bytes, (b) => B2U[b]).join('');

function parseRanks(r) {
  const out = []; // [bytes, rank]
  for (const line of r.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, off, ...toks] = line.split(' ');
    const o = parseInt(off, 10);
    toks.forEach((t, i) => out.push([Buffer.from(t, 'base64'), o + i]));
  }
  out.sort((a, b) => a[1] - b[1]);
  return out;
}

// tiktoken ranks -> HF vocab + merges: the merge that forms a token is the last step of
// BPE on its bytes restricted to lower ranks.
function tiktokenToHf(r) {
  const list = parseRanks(r);
  const rank = new Map(list.map(([b, k]) => [b.toString('latin1'), k]));
  const vocab = {};
  const merges = [];
  for (const [bytes, k] of list) {
    vocab[enc(bytes)] = k;
    if (bytes.length < 2) continue;
    let parts = Array.from(bytes, (b) => Buffer.from([b]));
    for (;;) {
      let best = -1, bestRank = Infinity;
      for (let i = 0; i + 1 < parts.length; i++) {
        const rr = rank.get(Buffer.concat([parts[i], parts[i + 1]]).toString('latin1'));
        if (rr !== undefined && rr < k && rr < bestRank) { bestRank = rr; best = i; }
      }
      if (best < 0) break;
      parts.splice(best, 2, Buffer.concat([parts[best], parts[best + 1]]));
    }
    if (parts.length !== 2) throw new Error(`cannot derive merge for rank ${k}`);
    merges.push([enc(parts[0]), enc(parts[1])]);
  }
  return { vocab, merges };
}

const added = (id, content, special = true) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special,
});

function write(name, tok, config) {
  const dir = path.join(outdir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tok));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
}

const LLAMA3_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// ---- GPT-2 ----
{
  const { vocab, merges } = tiktokenToHf(gpt2Ranks);
  vocab['<|endoftext|>'] = 50256;
  write('gpt2', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(50256, '<|endoftext|>')],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
             fuse_unk: false, byte_fallback: false, vocab, merges: merges.map(([a, b]) => `${a} ${b}`) },
  }, { clean_up_tokenization_spaces: false, bos_token: '<|endoftext|>', eos_token: '<|endoftext|>' });
}

// ---- cl100k-based: Llama-3 and Qwen2 styles ----
{
  const { vocab, merges } = tiktokenToHf(cl100kRanks);
  const specials = Object.entries(cl100kRanks.special_tokens).map(([c, id]) => added(id, c));
  specials.push(added(100277, '<|begin_of_text|>'), added(100278, '<|end_of_text|>'),
                added(100279, '<|im_start|>'), added(100280, '<|im_end|>'));
  const model = { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                  end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges };
  const split = (re) => ({ type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: re }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false } ] });
  write('llama3', {
    version: '1.0', truncation: null, padding: null, added_tokens: specials, normalizer: null,
    pre_tokenizer: split(LLAMA3_RE),
    post_processor: { type: 'Sequence', processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
               { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [100277], tokens: ['<|begin_of_text|>'] } } } ] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { ...model, ignore_merges: true },
  }, { clean_up_tokenization_spaces: false, bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>' });
  write('qwen2', {
    version: '1.0', truncation: null, padding: null, added_tokens: specials,
    normalizer: { type: 'NFC' },
    pre_tokenizer: split(QWEN2_RE),
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model,
  }, { clean_up_tokenization_spaces: false, eos_token: '<|im_end|>' });
}

// ---- Llama-2 (SentencePiece BPE with byte fallback) ----
{
  const vocabById = llamaTokenizer.vocabById;
  const vocab = Object.create(null); // no prototype: tokens like "constructor" must not look present
  vocabById.forEach((t, i) => { if (!Object.hasOwn(vocab, t)) vocab[t] = i; });
  const merges = [];
  for (const key of llamaTokenizer.merges.keys()) {
    const sp = key.indexOf(' ');
    const a = key.slice(0, sp), b = key.slice(sp + 1);
    if (Object.hasOwn(vocab, a + b) && Object.hasOwn(vocab, a) && Object.hasOwn(vocab, b)) merges.push(`${a} ${b}`);
  }
  write('llama2', {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')],
    normalizer: { type: 'Sequence', normalizers: [
      { type: 'Prepend', prepend: '\u2581' },
      { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' } ] },
    pre_tokenizer: null,
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
             { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' },
      { type: 'ByteFallback' }, { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 } ] },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
  }, { clean_up_tokenization_spaces: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' });
}
console.log(`tokenizers written to ${outdir}`);
