#!/usr/bin/python3
"""The 4-bit weights' error by group size and scale format, on a checkpoint's matrices.

Quantizes every 2-D weight matrix of a .safetensors file (the embedding table as the tied
head, where the checkpoint ties it) by the rule of --weights q4 (engine/cpu/kernels_q4.h:
per group of G along the input dimension, d = m / -8 with m the value of largest |w|,
q = round(w / d) half away from zero, clamped to [-8, 7]) with the scale kept in f32 or
rounded to f16, and prints the rms of the error over the rms of the weights, for G = 32,
64 and 128 (a matrix whose width is not a multiple of G is left out, and the count of
matrices says so; 32 and 64 are also shown on the matrices 128 takes). The engine's own numbers (logits, perplexity) come from
bench/weights_accuracy.py; this shows what the group size and the scale's format cost
the weights themselves.

usage: bench/q4_weight_error.py MODEL.safetensors
"""
import json
import struct
import sys

import numpy as np


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header, base, out = json.loads(b[8:8 + n]), 8 + n, {}
    for k, v in header.items():
        if k == "__metadata__" or len(v["shape"]) != 2:
            continue
        s, e = v["data_offsets"]
        raw = b[base + s:base + e]
        if v["dtype"] == "F32":
            a = np.frombuffer(raw, np.float32)
        elif v["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F16":
            a = np.frombuffer(raw, np.float16).astype(np.float32)
        else:
            continue
        out[k] = a.reshape(v["shape"])
    return out


def q4(w, g, f16):
    x = w.reshape(-1, g).astype(np.float32)
    m = x[np.arange(x.shape[0]), np.argmax(np.abs(x), axis=1)]
    d = (m / np.float32(-8)).astype(np.float32)
    if f16:
        d = d.astype(np.float16).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    p = (x * inv[:, None]).astype(np.float64)
    q = np.clip(np.trunc(p + np.where(p < 0, -0.5, 0.5)), -8, 7)
    return (q * d[:, None]).reshape(w.shape)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    mats = load(sys.argv[1])
    for g, only128 in ((32, 0), (64, 0), (128, 1), (32, 1), (64, 1)):
        for f16 in (False, True):
            num = den = 0.0
            used = [w for w in mats.values() if w.shape[1] % (128 if only128 else g) == 0]
            for w in used:
                e = q4(w, g, f16).astype(np.float64) - w
                num += float(np.sum(e * e))
                den += float(np.sum(w.astype(np.float64) ** 2))
            print("group %3d, %s scales: weight rms error / weight rms %.7f (%d of %d matrices)" %
                  (g, "f16" if f16 else "f32", (num / den) ** 0.5 if den else 0, len(used),
                   len(mats)))


if __name__ == "__main__":
    main()
