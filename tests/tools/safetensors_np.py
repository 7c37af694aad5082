"""Minimal safetensors reader/writer helpers on numpy (no torch, no safetensors package).

Format (https://github.com/huggingface/safetensors):
    u64 little-endian N | N bytes of JSON header | raw little-endian tensor data
The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} with
offsets relative to the start of the data area, plus an optional "__metadata__" object.

Used by the checkpoint generator, the numpy reference and the engine tests.
Reading: `load_checkpoint(dir)` handles both `model.safetensors` and a sharded checkpoint
(`model.safetensors.index.json` + shards) and returns {name: numpy array}.
"""
import json
import os
import struct

import numpy as np

# dtype name -> (numpy storage dtype, element size in bytes)
DTYPES = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # stored as raw u16, converted on read
}


def bf16_bits_to_f32(bits):
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> uint16 bfloat16 bit patterns, round to nearest even (finite inputs)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))
    return ((b + rounding) >> np.uint32(16)).astype(np.uint16)


def encode(arr, dtype):
    """numpy array (any float) -> little-endian bytes in safetensors dtype `dtype`."""
    a = np.asarray(arr)
    if dtype == "F32":
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(a, dtype="<f2").tobytes()
    if dtype == "BF16":
        return f32_to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes()
    if dtype == "F64":
        return np.ascontiguousarray(a, dtype="<f8").tobytes()
    raise ValueError("unsupported dtype %r" % dtype)


def decode(buf, dtype, shape):
    """bytes -> float32 numpy array (float64 for F64)."""
    if dtype not in DTYPES:
        raise ValueError("unsupported dtype %r" % dtype)
    npdt, _ = DTYPES[dtype]
    a = np.frombuffer(buf, dtype=npdt)
    if dtype == "BF16":
        a = bf16_bits_to_f32(a)
    elif dtype == "F16":
        a = a.astype(np.float32)
    return a.reshape(shape)


def read_header(path):
    """Returns (header dict, data start offset in file)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError("%s: truncated (no header length)" % path)
        (n,) = struct.unpack("<Q", raw)
        hdr = f.read(n)
        if len(hdr) != n:
            raise ValueError("%s: truncated header" % path)
    return json.loads(hdr.decode("utf-8")), 8 + n


def header_bytes(header, align=8):
    """Serialises a header dict the way the reference writer does: compact JSON padded
    with spaces so that the data area starts at a multiple of `align` bytes."""
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(h))) % align
    return h + b" " * pad


def read_file(path, as_float64=False):
    """Reads one .safetensors file -> {name: array}. Validates offsets strictly."""
    header, start = read_header(path)
    size = os.path.getsize(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype, shape = info["dtype"], [int(s) for s in info["shape"]]
            b, e = info["data_offsets"]
            _, esz = DTYPES[dtype]
            n = int(np.prod(shape)) if shape else 1
            if e < b or e - b != n * esz or start + e > size:
                raise ValueError("%s: bad data_offsets for %s" % (path, name))
            f.seek(start + b)
            a = decode(f.read(e - b), dtype, shape)
            out[name] = a.astype(np.float64) if as_float64 else a
    return out


def checkpoint_files(model_dir):
    """Returns the list of safetensors files of a checkpoint dir."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        return sorted(set(wm.values()))
    return ["model.safetensors"]


def load_checkpoint(model_dir, as_float64=True):
    """Reads a checkpoint dir (single file or index + shards) -> {name: array}."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for fn in sorted(set(wm.values())):
            part = read_file(os.path.join(model_dir, fn), as_float64)
            for name in part:
                if wm.get(name) != fn:
                    raise ValueError("tensor %s in %s is not mapped there by the index" % (name, fn))
            out.update(part)
        missing = [n for n in wm if n not in out]
        if missing:
            raise ValueError("tensors named by the index are missing: %s" % missing[:5])
        return out
    return read_file(os.path.join(model_dir, "model.safetensors"), as_float64)


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def write_file(path, tensors, dtype="F32", metadata=None):
    """Writes {name: array} to `path` in one dtype (small tensors; everything in memory).
    Tensor order follows the reference writer: sorted by name (single dtype)."""
    names = sorted(tensors)
    blobs = [encode(tensors[n], dtype) for n in names]
    header = {"__metadata__": metadata if metadata is not None else {"format": "pt"}}
    off = 0
    for n, blob in zip(names, blobs):
        header[n] = {"dtype": dtype, "shape": list(np.shape(tensors[n])),
                     "data_offsets": [off, off + len(blob)]}
        off += len(blob)
    hb = header_bytes(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for blob in blobs:
            f.write(blob)


def read_raw(path):
    """Returns (metadata or None, [(name, dtype, shape, data bytes)] in data order).
    Only for well-formed files (used to build corrupted variants)."""
    header, start = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    meta = header.pop("__metadata__", None)
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return meta, [(n, i["dtype"], list(i["shape"]), data[i["data_offsets"][0]:i["data_offsets"][1]])
                  for n, i in items]


def write_raw(path, entries, metadata=None, header_hook=None):
    """Writes [(name, dtype, shape, bytes)] contiguously in the given order. header_hook, if
    given, may mutate the header dict (after offsets are filled in) before it is written."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, blob in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        off += len(blob)
    if header_hook is not None:
        header_hook(header)
    hb = header_bytes(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, _, _, blob in entries:
            f.write(blob)
