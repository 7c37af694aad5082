// Reads the length-prefixed corpus file written by make_corpus.mjs.
import fs from 'node:fs';

export function readCorpus(p) {
  const buf = fs.readFileSync(p);
  const out = [];
  let i = 0;
  while (i < buf.length) {
    const nl = buf.indexOf(10, i);
    const n = parseInt(buf.subarray(i, nl).toString(), 10);
    out.push(buf.subarray(nl + 1, nl + 1 + n));
    i = nl + 1 + n + 1;
  }
  return out;
}
