"""GGUF (version 3) writing and reading, and ggml's F16, BF16, Q8_0 and Q4_0
encodings in numpy, for the llama.cpp side-by-side benchmark.

The layout follows llama.cpp's gguf-py (constants.py, gguf_writer.py): a
header (magic, version, tensor count, key/value count), the key/value pairs,
one info record per tensor (name, dims innermost first, ggml type, offset
into the data section), padding to the alignment, then the tensors' bytes,
each at an aligned offset. Everything is little-endian.

The reader is independent of the writer's bookkeeping (it parses the bytes
back), so the converter's test can catch a layout the writer gets wrong.
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf value types (GGUFValueType)
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32 = range(7)
T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(7, 13)
SCALAR_FMT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
              T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
              T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}

# ggml tensor types (GGMLQuantizationType) and their (block elements, block bytes)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_BF16 = 0, 1, 2, 8, 30
BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2),
         GGML_Q8_0: (32, 34), GGML_Q4_0: (32, 18)}
TYPE_BY_NAME = {"F32": GGML_F32, "F16": GGML_F16, "BF16": GGML_BF16,
                "Q8_0": GGML_Q8_0, "Q4_0": GGML_Q4_0}
# general.file_type (LlamaFileType) for a file whose matrices are all one type
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "BF16": 32}


def tensor_nbytes(gtype, n_elems):
    per, size = BLOCK[gtype]
    if n_elems % per:
        raise ValueError("%d elements are not whole %d-element blocks" % (n_elems, per))
    return n_elems // per * size


def to_bf16(x):
    """f32 -> bf16 bits, round to nearest even (NaN kept quiet), as ggml does."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r


def q8_0(x):
    """ggml's quantize_row_q8_0_ref: per 32 values d = amax/127 (stored f16),
    q = round(x/d) to int8."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    d = np.abs(b).max(axis=1) / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    v = b * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)  # roundf: halves away from 0
    out = np.empty((b.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


def q4_0(x):
    """ggml's quantize_row_q4_0_ref: per 32 values the one of largest
    magnitude m gives d = m / -8; q = min(15, trunc(x/d + 8.5)); element j in
    the low nibble of byte j, element j+16 in its high nibble."""
    b = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    idx = np.abs(b).argmax(axis=1)
    m = b[np.arange(b.shape[0]), idx]
    d = m / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, (b * inv[:, None] + 8.5).astype(np.int8)).astype(np.uint8)
    out = np.empty((b.shape[0], 18), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.reshape(-1)


def encode(x, gtype):
    """Bytes of f32 array x in ggml type gtype (x's last axis is ggml's ne0)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if gtype == GGML_F32:
        return x.astype("<f4").tobytes()
    if gtype == GGML_F16:
        return x.astype("<f2").tobytes()
    if gtype == GGML_BF16:
        return to_bf16(x).astype("<u2").tobytes()
    if gtype == GGML_Q8_0:
        return q8_0(x).tobytes()
    if gtype == GGML_Q4_0:
        return q4_0(x).tobytes()
    raise ValueError("unsupported ggml type %d" % gtype)


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == T_STRING:
        return _str(v)
    return struct.pack(SCALAR_FMT[vtype], v)


def _kv_bytes(key, vtype, v, elem_type=None):
    out = _str(key) + struct.pack("<I", vtype)
    if vtype != T_ARRAY:
        return out + _value(vtype, v)
    out += struct.pack("<IQ", elem_type, len(v))
    if elem_type in (T_FLOAT32, T_INT32, T_UINT32):
        return out + np.asarray(v, dtype=SCALAR_FMT[elem_type]).tobytes()
    return out + b"".join(_value(elem_type, e) for e in v)


def _pad(n):
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


class GGUFWriter:
    """Collects key/values and tensor descriptions, then streams the file:
    tensors come from a callback so a 340M-parameter model never sits in
    memory whole."""

    def __init__(self):
        self.kv = []
        self.tensors = []  # (name, dims innermost first, ggml type)

    def add(self, key, vtype, value, elem_type=None):
        self.kv.append(_kv_bytes(key, vtype, value, elem_type))

    def add_tensor_info(self, name, dims, gtype):
        self.tensors.append((name, list(dims), gtype))

    def write(self, path, produce):
        """produce(name) returns the tensor's bytes (already encoded)."""
        infos, off = [], 0
        for name, dims, gtype in self.tensors:
            infos.append(_str(name) + struct.pack("<I", len(dims))
                         + struct.pack("<%dQ" % len(dims), *dims)
                         + struct.pack("<IQ", gtype, off))
            off += tensor_nbytes(gtype, int(np.prod(dims)))
            off += _pad(off)
        head = (GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
                + b"".join(self.kv) + b"".join(infos))
        with open(path, "wb") as f:
            f.write(head + b"\0" * _pad(len(head)))
            for name, dims, gtype in self.tensors:
                data = produce(name)
                want = tensor_nbytes(gtype, int(np.prod(dims)))
                if len(data) != want:
                    raise ValueError("%s: %d bytes, expected %d" % (name, len(data), want))
                f.write(data + b"\0" * _pad(len(data)))


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise ValueError("string of %d bytes runs past the end" % n)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        if vtype not in SCALAR_FMT:
            raise ValueError("unknown value type %d" % vtype)
        return self.take(SCALAR_FMT[vtype])


def read_gguf(path):
    """Parses a GGUF file: returns (kv dict, tensors {name: (dims, type,
    absolute offset, nbytes)}). Raises ValueError on anything malformed,
    including tensor data that overlaps or runs past the end of the file."""
    with open(path, "rb") as f:
        buf = f.read()
    c = _Cursor(buf)
    if buf[:4] != GGUF_MAGIC:
        raise ValueError("bad magic %r" % buf[:4])
    c.pos = 4
    version, n_t, n_kv = c.take("<I"), c.take("<Q"), c.take("<Q")
    if version != GGUF_VERSION:
        raise ValueError("version %d" % version)
    kv = {}
    for _ in range(n_kv):
        key = c.string()
        kv[key] = c.value(c.take("<I"))
    align = kv.get("general.alignment", ALIGNMENT)
    infos = []
    for _ in range(n_t):
        name = c.string()
        nd = c.take("<I")
        dims = list(struct.unpack_from("<%dQ" % nd, buf, c.pos))
        c.pos += 8 * nd
        infos.append((name, dims, c.take("<I"), c.take("<Q")))
    start = c.pos + (align - c.pos % align) % align
    tensors, end = {}, 0
    for name, dims, gtype, off in sorted(infos, key=lambda t: t[3]):
        if gtype not in BLOCK:
            raise ValueError("%s: unknown ggml type %d" % (name, gtype))
        nb = tensor_nbytes(gtype, int(np.prod(dims)))
        if off % align or off < end or start + off + nb > len(buf):
            raise ValueError("%s: data at %d (+%d) misplaced" % (name, off, nb))
        end = off + nb
        tensors[name] = (dims, gtype, start + off, nb)
    return kv, tensors


def decode(buf, gtype, n):
    """f32 values of n elements of ggml type gtype from bytes buf (the
    inverse of encode, up to the quantization's rounding)."""
    if gtype == GGML_F32:
        return np.frombuffer(buf, "<f4", n).copy()
    if gtype == GGML_F16:
        return np.frombuffer(buf, "<f2", n).astype(np.float32)
    if gtype == GGML_BF16:
        return (np.frombuffer(buf, "<u2", n).astype(np.uint32) << 16).view(np.float32)
    per, size = BLOCK[gtype]
    b = np.frombuffer(buf, np.uint8, n // per * size).reshape(-1, size)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    if gtype == GGML_Q8_0:
        return (b[:, 2:].view(np.int8).astype(np.float32) * d).reshape(-1)
    lo, hi = (b[:, 2:] & 15).astype(np.float32) - 8, (b[:, 2:] >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * d).reshape(-1)
