#!/usr/bin/python3
"""Writes the tokenizer.json files fuzz_tokenizer loads at start into OUTDIR:

  exact_brown.json  the demo model's byte-level BPE (no normalizer: text round-trips)
  norm_brown.json   the same vocabulary behind NFKC + Lowercase, Digits and
                    Punctuation pre-tokenizers and added tokens with lstrip/rstrip
  spm_small.json    a small SentencePiece-style BPE: Prepend/Replace normalizer,
                    Metaspace, byte fallback, a Replace/ByteFallback/Fuse/Strip decoder
usage: make_tokenizers.py SOURCE_DIR OUTDIR
"""
import json
import os
import sys


def spm_small():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    pieces = ["\u2581", "e", "t", "a", "o", "n", "i", "s", "h", "r", "l", "d", "\u00e9", "\u4e2d"]
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("i", "n"), ("\u2581", "a"),
              ("e", "r"), ("o", "n"), ("\u2581", "s"), ("a", "n"), ("an", "d"),
              ("\u2581", "and")]
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for c, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    brown = json.load(open(os.path.join(src, "models", "brown-mhla", "tokenizer.json")))
    json.dump(brown, open(os.path.join(out, "exact_brown.json"), "w"))
    norm = dict(brown)
    norm["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"},
                                                              {"type": "Lowercase"}]}
    norm["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Punctuation", "behavior": "Isolated"},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
    top = max(brown["model"]["vocab"].values())
    norm["added_tokens"] = brown["added_tokens"] + [
        {"id": top + 1, "content": "<|user|>", "single_word": False, "lstrip": True,
         "rstrip": True, "normalized": False, "special": True},
        {"id": top + 2, "content": "hello world", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": True, "special": False}]
    json.dump(norm, open(os.path.join(out, "norm_brown.json"), "w"))
    json.dump(spm_small(), open(os.path.join(out, "spm_small.json"), "w"))


if __name__ == "__main__":
    main()
