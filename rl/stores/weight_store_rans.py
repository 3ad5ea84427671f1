"""Context-modelled entropy coding of weight deltas (the weight store's 'rans' coding), in numpy.

A shard's delta is one symbol per element: the zigzag bit difference z = zigzag(new - old) of
its sampler-dtype bit pattern (0 = unchanged, 1 = -1 ulp, 2 = +1 ulp, ...), visited in the
exponent order of the old values. Each z is split into a token and raw bits, as JPEG XL's
"hybrid uint" does: z < 16 is its own token; a larger z is coded by the position of its leading
one bit and the three bits below it (the token) plus the remaining low bits sent verbatim (close
to uniform for bf16 deltas; for f32 ones on Adam's first step they are not, see RESULTS). Tokens
are entropy-coded with static frequencies per *context*, the old value's exponent: whether an
element moves, and by how many ulps, depends mostly on its ulp, i.e. its exponent (an update of
~lr moves a bf16 weight when lr exceeds half an ulp, |w|/512), so each exponent gets its own
distribution and the coder pays close to the conditional entropy H(z | exponent): +1% on the
trained small model's biggest leaf, where format 4's zlib paid +20% (bench/RESULTS_LOG.md, "Weight
deltas with an entropy coder"). Where the per-exponent tables cost more than they save (few
elements per exponent) one shared distribution is used; a context with a single token (nothing
of that exponent changed) is not coded at all.

The entropy coder is rANS (Duda's asymmetric numeral systems) with 32-bit states and 16-bit
renormalisation, vectorised over `lanes` interleaved states: symbol i belongs to lane i % lanes,
and each numpy step codes one symbol of every lane. A big shard gets ~STEPS symbols per lane, so
the lanes' final states (4 bytes each) cost ~32 / STEPS bits per element and the Python loop runs
at most STEPS times whatever the shard's size.

Blob: header (uint32: elements, lanes, contexts, tokens, table bytes, words), the zlib'd
frequency table [contexts, tokens] (uint16, each row sums to 2**SCALE_BITS), the lanes' final
states (uint32), the rANS words (uint16), then the raw bits (packed, grouped by their count).
"""

from __future__ import annotations

import zlib

import numpy as np

SCALE_BITS = 15  # frequencies sum to 2**15: the rarest token in a context costs <= 15 bits
M = 1 << SCALE_BITS
RANS_L = 1 << 16  # states live in [2**16, 2**32): one 16-bit word out per renormalisation
STEPS = 8192  # symbols per lane: lane states then cost 32 / 8192 = 0.004 bits per element
MIN_LANES, MIN_STEPS = 256, 256  # see _lanes
LITERALS = 16  # z < 16 is its own token
MSB_IN_TOKEN = 3  # bits below the leading one kept in the token (the rest go raw)
LEADING_MIN = LITERALS.bit_length() - 1  # the leading one of a z >= 16 is at bit >= 4
HEADER = 6 * 4
EXPONENT_SHIFT = {2: 7, 4: 23}  # bfloat16: 8 exponent bits above 7 mantissa bits; float32: 23


BIT_LENGTH16 = (np.frexp(np.arange(1 << 16, dtype=np.float64))[1]).astype(np.uint8)  # 0 -> 0


def _leading_one(z: np.ndarray) -> np.ndarray:
    """Position of z's leading one bit (z >= 1), from a 65,536-entry table: no float math."""
    if z.dtype == np.uint16:
        return BIT_LENGTH16[z].astype(np.int64) - 1
    hi = (z >> 16).astype(np.uint16)
    lo = (z & 0xFFFF).astype(np.uint16)
    return np.where(hi > 0, BIT_LENGTH16[hi].astype(np.int64) + 15, BIT_LENGTH16[lo] - 1)


def _tokenize(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-> (token, raw bit count), both uint8."""
    big = z >= LITERALS
    n = _leading_one(z)
    nraw = np.where(big, n - MSB_IN_TOKEN, 0)
    msb = (z.astype(np.int64) >> nraw) & ((1 << MSB_IN_TOKEN) - 1)
    token = np.where(big, LITERALS + ((n - LEADING_MIN) << MSB_IN_TOKEN) + msb, z)
    return token.astype(np.uint8), nraw.astype(np.uint8)


TOKEN16, NRAW16 = _tokenize(np.arange(1 << 16, dtype=np.uint16))  # bfloat16: one gather each


def tokenize(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[N] uint16/uint32 -> (token uint8, raw bit count uint8, raw bits in z's dtype)."""
    token, nraw = (TOKEN16[z], NRAW16[z]) if z.dtype == np.uint16 else _tokenize(z)
    raw = z & ((np.ones(1, z.dtype) << nraw.astype(z.dtype)) - np.ones(1, z.dtype))
    return token, nraw, raw


_TOKENS = np.arange(256)
NRAW_OF_TOKEN = np.where(
    _TOKENS >= LITERALS, ((_TOKENS - LITERALS) >> MSB_IN_TOKEN) + LEADING_MIN - MSB_IN_TOKEN, 0
).astype(np.uint8)
HEAD_OF_TOKEN = (1 << MSB_IN_TOKEN) | ((_TOKENS - LITERALS) & ((1 << MSB_IN_TOKEN) - 1))


def raw_bit_counts(token: np.ndarray) -> np.ndarray:
    """The raw bit count each token implies (the decoder's view of tokenize)."""
    return NRAW_OF_TOKEN[token]


def detokenize(token: np.ndarray, raw: np.ndarray, dtype) -> np.ndarray:
    z = token.astype(dtype)
    big = np.flatnonzero(token >= LITERALS)  # bfloat16: a few; float32: most
    t = token[big]
    z[big] = (HEAD_OF_TOKEN[t].astype(dtype) << NRAW_OF_TOKEN[t].astype(dtype)) | raw[big]
    return z


# --- raw bits: grouped by their count k, each group packed as k-bit big-endian fields ----------

CHUNK = 1 << 20  # values per packing pass (bounds the [chunk, 64] bit matrix: 64 MiB)


def pack_raw(nraw: np.ndarray, raw: np.ndarray) -> bytes:
    out = []
    for k in np.unique(nraw[nraw > 0]).tolist():
        vals = raw[nraw == k].astype(">u8")
        for s in range(0, vals.size, CHUNK):
            b = np.unpackbits(vals[s : s + CHUNK].view(np.uint8).reshape(-1, 8), axis=1)
            out.append(b[:, 64 - k :].reshape(-1))
    return np.packbits(np.concatenate(out)).tobytes() if out else b""


def unpack_raw(blob: bytes, nraw: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(blob, np.uint8))
    raw = np.zeros(nraw.size, np.uint64)
    pos = 0
    for k in np.unique(nraw[nraw > 0]).tolist():
        idx = np.flatnonzero(nraw == k)
        for s in range(0, idx.size, CHUNK):
            part = idx[s : s + CHUNK]
            b = bits[pos : pos + part.size * k].reshape(-1, k)
            if b.shape[0] != part.size:
                raise ValueError("weight store: corrupt rans delta (raw bits)")
            full = np.zeros((part.size, 64), np.uint8)
            full[:, 64 - k :] = b
            raw[part] = np.packbits(full, axis=1).view(">u8").reshape(-1)
            pos += part.size * k
    return raw


# --- static frequency tables per context -----------------------------------------------------


def quantize(counts: np.ndarray) -> np.ndarray:
    """[C, T] counts -> frequencies summing to M per row, >= 1 wherever the count is > 0 (so every
    token that occurs stays codable); the rounding error goes to each row's most frequent token."""
    total = counts.sum(1, keepdims=True)
    f = np.where(counts > 0, np.maximum(1, counts * M // np.maximum(total, 1)), 0)
    top = np.argmax(counts, 1)
    f[np.arange(len(f)), top] += M - f.sum(1)
    return f


def _runs(old_bits: np.ndarray) -> np.ndarray:
    """[256] elements per exponent of old bits already in exponent order (each exponent's
    elements are one run there): the contexts' extents, by binary search, not a pass."""
    e = ((old_bits >> EXPONENT_SHIFT[old_bits.itemsize]) & 0xFF).astype(np.uint8)
    starts = np.searchsorted(e, np.arange(256, dtype=np.uint8))
    return np.diff(starts, append=old_bits.size)


def _lanes(n: int) -> int:
    """At most STEPS numpy steps per shard (the Python loop's length: lane states then cost
    32 / STEPS bits per element); a smaller shard gets MIN_LANES lanes (each numpy call then works
    on a wide vector: ~15 calls per step at a few us each), unless that leaves fewer than
    MIN_STEPS symbols per lane (its 4-byte state would cost more than 1/8 bit per element)."""
    return max(1, -(-n // STEPS), min(MIN_LANES, -(-n // MIN_STEPS)))


def _by_step(x: np.ndarray, lanes: int, pad) -> np.ndarray:
    """[N] -> [steps, lanes] (symbol i at row i // lanes, column i % lanes), padded."""
    steps = -(-x.size // lanes)
    out = np.full(steps * lanes, pad, x.dtype)
    out[: x.size] = x
    return out.reshape(steps, lanes)


def _per_symbol(table: np.ndarray, token: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """table[context of symbol i, token i] for every i, one context's run at a time."""
    out = np.empty(token.size, table.dtype)
    s = 0
    for row, n in zip(table, runs):
        out[s : s + n] = row[token[s : s + n]]
        s += n
    return out


def rans_encode(token: np.ndarray, runs: np.ndarray, freq: np.ndarray, lanes: int):
    """-> (final states uint32 [lanes], words uint16). Pad symbols (f = M, c = 0) leave a state
    unchanged, so a partial last step needs no special case. The state division x // f runs in
    float64: x < 2**32 and f < 2**16, so a non-integer x / f is >= 2**-16 from an integer, far
    above float64's rounding there (2**-21), and its floor is exact."""
    cum = np.cumsum(freq, 1) - freq
    f = _by_step(_per_symbol(freq.astype(np.uint16), token, runs), lanes, np.uint16(M))
    c = _by_step(_per_symbol(cum.astype(np.uint16), token, runs), lanes, np.uint16(0))
    x = np.full(lanes, float(RANS_L))
    words = []
    for t in range(f.shape[0] - 1, -1, -1):  # rANS codes backwards: the decoder reads forwards
        ft = f[t].astype(np.float64)
        out = x >= ft * float(1 << (32 - SCALE_BITS))  # x_max = ((RANS_L >> SCALE) << 16) * f
        if out.any():
            xo = x[out]
            hi = np.floor(xo / 65536.0)
            words.append((xo - hi * 65536.0).astype(np.uint16))  # the low 16 bits
            x[out] = hi
        q = np.floor(x / ft)
        x = q * float(M) + (x - q * ft) + c[t]
    words.reverse()
    w = np.concatenate(words) if words else np.zeros(0, np.uint16)
    return x.astype(np.uint32), w


def _decode_tables(freq: np.ndarray):
    """[contexts + 1 (pad), M] tables, flat: slot -> token, and slot -> (f, slot - cum) packed as
    f << 16 | bias: the decoder's two gathers per symbol. The pad context decodes token 0 with
    f = M, which leaves a state unchanged."""
    n_ctx, n_tok = freq.shape
    cum = np.cumsum(freq, 1) - freq
    token = np.zeros((n_ctx + 1, M), np.uint8)
    fb = np.zeros((n_ctx + 1, M), np.uint64)
    fb[n_ctx] = (M << 16) | np.arange(M)
    for i in range(n_ctx):
        t = np.repeat(np.arange(n_tok), freq[i])
        token[i] = t
        fb[i] = (freq[i][t].astype(np.uint64) << 16) | (np.arange(M) - cum[i][t]).astype(np.uint64)
    return token.reshape(-1), fb.reshape(-1)


def rans_decode(states, words, runs: np.ndarray, freq: np.ndarray) -> np.ndarray:
    lanes, n_ctx = states.size, freq.shape[0]
    lut_token, lut_fb = _decode_tables(freq)
    rows = np.repeat(np.arange(n_ctx, dtype=np.uint32) * M, runs)  # each symbol's table row
    base = _by_step(rows, lanes, np.uint32(n_ctx * M))
    x = states.astype(np.uint64)
    w = words.astype(np.uint64)
    tokens = np.empty(base.shape, np.uint8)
    ptr = 0
    mask, low16, sixteen = np.uint64(M - 1), np.uint64(0xFFFF), np.uint64(16)
    for t in range(base.shape[0]):
        i = base[t] + (x & mask)
        tokens[t] = lut_token[i]
        fb = lut_fb[i]
        x = (fb >> sixteen) * (x >> np.uint64(SCALE_BITS)) + (fb & low16)
        low = x < RANS_L
        k = int(np.count_nonzero(low))
        if k:
            if ptr + k > w.size:
                raise ValueError("weight store: corrupt rans delta (words)")
            x[low] = (x[low] << sixteen) | w[ptr : ptr + k]
            ptr += k
    if ptr != w.size or np.any(x != RANS_L):
        raise ValueError("weight store: corrupt rans delta (final states)")
    return tokens.reshape(-1)[: rows.size]


def _cost_bits(counts: np.ndarray, freq: np.ndarray) -> float:
    """Bits rANS spends on symbols with these counts under these frequencies (within ~0.1%)."""
    used = counts > 0
    return float((counts[used] * (SCALE_BITS - np.log2(freq[used]))).sum())


def _model(token: np.ndarray, runs: np.ndarray, n_tok: int):
    """-> (runs, freq, zlib'd table) of the cheaper model: one
    distribution per exponent, or one for the whole shard where the per-exponent tables cost more
    than they save (few elements per exponent, e.g. a tiny shard or scattered bit patterns)."""
    bounds = np.cumsum(runs) - runs
    counts = np.stack(
        [np.bincount(token[s : s + n], minlength=n_tok) for s, n in zip(bounds, runs)]
    )
    best = None
    for r, c in ((runs, counts), (np.array([token.size]), counts.sum(0, keepdims=True))):
        freq = quantize(c)
        table = zlib.compress(freq.astype(np.uint16).tobytes(), 9)
        size = _cost_bits(c, freq) / 8 + len(table)
        if best is None or size < best[3]:
            best = (r, freq, table, size)
    return best[:3]


def _coded(freq: np.ndarray) -> np.ndarray:
    """Contexts with more than one token: only their symbols are rANS-coded. A context with one
    token (no element of that exponent changed, or all by the same amount) costs no bits and,
    skipped, no time: at low lr most large-magnitude exponents are such."""
    return np.count_nonzero(freq, 1) > 1


def _segments(token: np.ndarray, runs: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The tokens of the kept contexts' runs, concatenated."""
    bounds = np.cumsum(runs) - runs
    parts = [token[s : s + k] for s, k, y in zip(bounds, runs, keep) if y]
    return np.concatenate(parts) if parts else token[:0]


def encode(z: np.ndarray, old_bits: np.ndarray) -> bytes:
    """z (zigzag differences) and the old bits, both in exponent order -> blob."""
    token, nraw, raw = tokenize(z)
    runs = _runs(old_bits)
    runs = runs[runs > 0]  # the contexts present: a trained shard uses ~30-60 exponents of 256
    runs, freq, table = _model(token, runs, int(token.max()) + 1)
    coded = _coded(freq)
    active = _segments(token, runs, coded)
    lanes = _lanes(active.size)
    states, words = rans_encode(active, runs[coded], freq[coded], lanes)
    head = np.array([z.size, lanes, *freq.shape, len(table), words.size], np.uint32)
    return b"".join([head.tobytes(), table, states.tobytes(), words.tobytes(), pack_raw(nraw, raw)])


def decode(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    """blob, old bits in exponent order -> z in exponent order (old_bits' dtype)."""
    n, lanes, n_ctx, n_tok, nt, nw = (int(v) for v in np.frombuffer(blob[:HEADER], np.uint32))
    if n != old_bits.size:
        raise ValueError(f"weight store: rans delta of {n} elements for a shard of {old_bits.size}")
    pos = HEADER + nt
    # uint16 holds every frequency: the largest, M = 2**15, is a context with a single token.
    freq = np.frombuffer(zlib.decompress(blob[HEADER:pos]), np.uint16).reshape(n_ctx, n_tok)
    states = np.frombuffer(blob[pos : pos + 4 * lanes], np.uint32)
    pos += 4 * lanes
    words = np.frombuffer(blob[pos : pos + 2 * nw], np.uint16)
    pos += 2 * nw
    runs = _runs(old_bits)
    runs = runs[runs > 0] if n_ctx > 1 else np.array([n])  # one context: the whole shard
    if runs.size != n_ctx or states.size != lanes or words.size != nw:
        raise ValueError("weight store: corrupt rans delta (contexts or length)")
    freq = freq.astype(np.int64)
    coded = _coded(freq)
    active = rans_decode(states, words, runs[coded], freq[coded])
    token = np.repeat(np.argmax(freq, 1).astype(np.uint8), runs)  # one-token contexts: that token
    bounds = np.cumsum(runs) - runs
    at = 0
    for s, k in zip(bounds[coded], runs[coded]):
        token[s : s + k] = active[at : at + k]
        at += k
    return detokenize(token, unpack_raw(blob[pos:], raw_bit_counts(token)), old_bits.dtype)
