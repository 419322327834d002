"""ggml's reference K-quantizers in numpy: quantize_row_q4_K_ref,
quantize_row_q5_K_ref and quantize_row_q6_K_ref of ggml/src/ggml-quants.c
(llama.cpp v0.5.0; no importance matrix: what llama-quantize writes), with
their helpers make_qkx2_quants and make_qx_quants, written here from that
source independently of the runtime's C (runtime/src/ggml_quants.c).

Every sum runs in ggml's order and every operation in float32 (numpy's
elementwise float32 arithmetic is IEEE's, np.rint is nearest_int's
round-half-even, astype(float16) is GGML_FP32_TO_FP16), vectorized over the
blocks, so the bytes are ggml's: main() checks them against the rows
llama.cpp quantized in test/runtime/Inputs/gguf/quants-q*_k.gguf.

Each function takes `w` [rows, k] (k a multiple of 256) and returns (the
blocks' bytes, their dequantized values [rows, k] as ggml's dequantize_row_*
computes them).
"""
import numpy as np

F = np.float32


def _f16(x):
    return x.astype(np.float16)


def _make_qkx2(x, w, nmax, rmin, rdelta, nstep):
    """make_qkx2_quants (squared error) on sub-blocks x, w [n, 32]: levels
    L [n, 32] in [0, nmax], scales [n] and mins [n] (stored as -min >= 0)."""
    n = x.shape[0]
    mn, mx = x[:, 0].copy(), x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, 32):
        mn = np.where(x[:, i] < mn, x[:, i], mn)
        mx = np.where(x[:, i] > mx, x[:, i], mx)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    mn = np.where(mn > 0, F(0), mn)
    flat = mx == mn  # returns at once: L = 0, scale 0
    rng = np.where(flat, F(1), mx - mn)
    iscale = F(nmax) / rng
    scale = F(1) / iscale
    L = np.clip(np.rint(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(F)
    best = np.zeros(n, F)
    for i in range(32):
        diff = scale * L[:, i] + mn - x[:, i]
        best = best + w[:, i] * (diff * diff)
    for step in range(nstep + 1):
        # ggml's loop goes on from the best min so far: its range too.
        rng = np.where(flat, F(1), mx - mn)
        iscale = (F(rmin) + F(rdelta) * F(step) + F(nmax)) / rng
        aux = np.clip(np.rint(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(F)
        sum_l = np.zeros(n, F)
        sum_l2 = np.zeros(n, F)
        sum_xl = np.zeros(n, F)
        for i in range(32):
            wl = w[:, i] * aux[:, i]
            sum_l = sum_l + wl
            sum_l2 = sum_l2 + wl * aux[:, i]
            sum_xl = sum_xl + wl * x[:, i]
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, F(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Ds
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        pos = this_min > 0
        this_min = np.where(pos, F(0), this_min)
        this_scale = np.where(pos, sum_xl / np.where(sum_l2 != 0, sum_l2, F(1)), this_scale)
        cur = np.zeros(n, F)
        for i in range(32):
            diff = this_scale * aux[:, i] + this_min - x[:, i]
            cur = cur + w[:, i] * (diff * diff)
        take = ok & (cur < best) & ~flat
        L = np.where(take[:, None], aux, L)
        best = np.where(take, cur, best)
        scale = np.where(take, this_scale, scale)
        mn = np.where(take, this_min, mn)
    L = np.where(flat[:, None], F(0), L)
    scale = np.where(flat, F(0), scale)
    return L, scale, -mn


def _q45_k(w, five):
    nmax = 31 if five else 15
    x = np.ascontiguousarray(w, F).reshape(-1, 8, 32)
    nb = x.shape[0]
    sub = x.reshape(-1, 32)
    sum_x2 = np.zeros(sub.shape[0], F)
    for i in range(32):
        sum_x2 = sum_x2 + sub[:, i] * sub[:, i]
    av_x = np.sqrt(sum_x2 / F(32))
    weights = av_x[:, None] + np.abs(sub)
    L, scales, mins = _make_qkx2(sub, weights, nmax, -0.5 if five else -1.0, 0.1,
                                 15 if five else 20)
    L = L.reshape(nb, 8, 32)
    scales, mins = scales.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale, max_min = np.zeros(nb, F), np.zeros(nb, F)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    inv_scale = np.where(max_scale > 0, F(63) / np.where(max_scale > 0, max_scale, F(1)), F(0))
    inv_min = np.where(max_min > 0, F(63) / np.where(max_min > 0, max_min, F(1)), F(0))
    ls = np.minimum(np.rint(inv_scale[:, None] * scales).astype(np.int64) & 255, 63)
    lm = np.minimum(np.rint(inv_min[:, None] * mins).astype(np.int64) & 255, 63)
    sc = np.zeros((nb, 12), np.int64)
    sc[:, 0:4] = ls[:, 0:4] | (ls[:, 4:8] >> 4) << 6
    sc[:, 4:8] = lm[:, 0:4] | (lm[:, 4:8] >> 4) << 6
    sc[:, 8:12] = (ls[:, 4:8] & 15) | (lm[:, 4:8] & 15) << 4
    d16 = _f16(max_scale / F(63))
    dmin16 = _f16(max_min / F(63))
    d = d16.astype(F)[:, None] * ls.astype(F)  # get_scale_min_k4 gives ls, lm back
    dm = dmin16.astype(F)[:, None] * lm.astype(F)
    nz = d != 0
    q = np.rint((x + dm[:, :, None]) / np.where(nz, d, F(1))[:, :, None])
    L = np.where(nz[:, :, None], np.clip(q, 0, nmax), L).astype(np.int64)
    # Values j and j + 32 of each 64 share a byte (low, high nibble); Q5_K's
    # fifth bits: bit 2 (j / 64) and the next of qh[l].
    pairs = L.reshape(nb, 4, 2, 32)
    qs = (pairs[:, :, 0] & 15) | (pairs[:, :, 1] & 15) << 4
    parts = [d16.view(np.uint8).reshape(nb, 2), dmin16.view(np.uint8).reshape(nb, 2),
             sc.astype(np.uint8)]
    if five:
        qh = np.zeros((nb, 32), np.int64)
        for j in range(8):
            qh |= (L[:, j] >> 4) << j
        parts.append(qh.astype(np.uint8))
    parts.append(qs.reshape(nb, 128).astype(np.uint8))
    raw = np.concatenate(parts, 1)
    deq = ((d16.astype(F)[:, None] * ls.astype(F))[:, :, None] * L.astype(F)
           - (dmin16.astype(F)[:, None] * lm.astype(F))[:, :, None])
    return raw.tobytes(), deq.astype(F).reshape(w.shape)


def q4_k(w):
    """Q4_K super-blocks of `w` and their dequantized values."""
    return _q45_k(w, False)


def q5_k(w):
    """Q5_K super-blocks of `w` and their dequantized values."""
    return _q45_k(w, True)


def _make_qx(x):
    """make_qx_quants(16, nmax 32, rmse_type 1, no weights) on x [n, 16]:
    levels [n, 16] in [0, 64) and scales [n]."""
    n, nmax = x.shape[0], 32
    at = np.abs(x).argmax(axis=1)  # the first of the largest magnitude
    mx = x[np.arange(n), at]
    zero = np.abs(mx) < F(1e-15)
    mxs = np.where(zero, F(1), mx)
    wx = x * x

    def fit(iscale):
        l = np.clip(np.rint(iscale[:, None] * x), -nmax, nmax - 1).astype(F)
        sumlx, suml2 = np.zeros(n, F), np.zeros(n, F)
        for i in range(16):
            sumlx = sumlx + wx[:, i] * x[:, i] * l[:, i]
            suml2 = suml2 + wx[:, i] * l[:, i] * l[:, i]
        return l, sumlx, suml2

    L, sumlx, suml2 = fit(F(-nmax) / mxs)
    scale = np.where(suml2 != 0, sumlx / np.where(suml2 != 0, suml2, F(1)), F(0))
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        l, sumlx, suml2 = fit(-(F(nmax) + F(0.1) * F(step)) / mxs)
        take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        L = np.where(take[:, None], l, L)
        scale = np.where(take, sumlx / np.where(take, suml2, F(1)), scale)
        best = np.where(take, scale * sumlx, best)
    L = np.where(zero[:, None], F(-nmax), L)  # levels 0 once shifted
    return (L + nmax).astype(np.int64), np.where(zero, F(0), scale)


def q6_k(w):
    """Q6_K super-blocks of `w` and their dequantized values."""
    x = np.ascontiguousarray(w, F).reshape(-1, 16, 16)
    nb = x.shape[0]
    L, scales = _make_qx(x.reshape(-1, 16))
    L, scales = L.reshape(nb, 16, 16), scales.reshape(nb, 16)
    max_scale, max_abs = np.zeros(nb, F), np.zeros(nb, F)
    for j in range(16):
        a = np.abs(scales[:, j])
        bigger = a > max_abs
        max_abs = np.where(bigger, a, max_abs)
        max_scale = np.where(bigger, scales[:, j], max_scale)
    zero = max_abs < F(1e-15)
    iscale = F(-128) / np.where(zero, F(1), max_scale)
    d16 = _f16(F(1) / iscale)
    sc = np.minimum(127, np.rint(iscale[:, None] * scales)).astype(np.int64)
    d = d16.astype(F)[:, None] * sc.astype(F)
    nz = d != 0
    q = np.clip(np.rint(x / np.where(nz, d, F(1))[:, :, None]), -32, 31) + 32
    L = np.where(nz[:, :, None], q, L).astype(np.int64).reshape(nb, 2, 4, 32)
    ql = np.concatenate([(L[:, :, 0] & 15) | (L[:, :, 2] & 15) << 4,
                         (L[:, :, 1] & 15) | (L[:, :, 3] & 15) << 4], 2)
    qh = (L[:, :, 0] >> 4) | (L[:, :, 1] >> 4) << 2 | (L[:, :, 2] >> 4) << 4 | (L[:, :, 3] >> 4) << 6
    raw = np.concatenate([ql.reshape(nb, 128).astype(np.uint8), qh.reshape(nb, 64).astype(np.uint8),
                          sc.astype(np.int8).view(np.uint8), d16.view(np.uint8).reshape(nb, 2)], 1)
    raw[zero] = 0
    deq = ((d16.astype(F)[:, None] * sc.astype(F))[:, :, None]
           * (L.reshape(nb, 16, 16) - 32).astype(F))
    deq[zero] = 0
    return raw.tobytes(), deq.astype(F).reshape(w.shape)


def main():
    """Checks the quantizers against llama.cpp's bytes for the rows of
    test/runtime/Inputs/gguf/quants-q*_k.gguf (its `source` and
    `quantized` tensors)."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    files = os.path.join(here, "..", "..", "runtime", "Inputs", "gguf")
    for name, fn in (("q4_k", q4_k), ("q5_k", q5_k), ("q6_k", q6_k)):
        tensors = read_gguf(os.path.join(files, "quants-%s.gguf" % name))
        src = np.frombuffer(tensors["source"], F).reshape(8, 768)
        raw, _ = fn(src)
        same = raw == tensors["quantized"]
        print(name, "llama.cpp's bytes" if same else "DIFFERS")
        if not same:
            raise SystemExit(1)


def read_gguf(path):
    """name -> bytes of the tensors of a little GGUF file (no metadata
    values but strings, u32 and f32)."""
    import struct
    b = open(path, "rb").read()
    _, _, n_t, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    at = 24

    def string(at):
        (n,) = struct.unpack_from("<Q", b, at)
        return b[at + 8:at + 8 + n].decode(), at + 8 + n
    sizes = {4: 4, 5: 4, 6: 4, 0: 1, 1: 1, 2: 2, 3: 2, 7: 1, 10: 8, 11: 8, 12: 8}
    for _ in range(n_kv):
        _, at = string(at)
        (ty,) = struct.unpack_from("<I", b, at)
        at += 4
        if ty == 8:
            _, at = string(at)
        elif ty == 9:
            ety, n = struct.unpack_from("<IQ", b, at)
            at += 12
            for _ in range(n):
                if ety == 8:
                    _, at = string(at)
                else:
                    at += sizes[ety]
        else:
            at += sizes[ty]
    infos = []
    for _ in range(n_t):
        name, at = string(at)
        (nd,) = struct.unpack_from("<I", b, at)
        dims = struct.unpack_from("<%dQ" % nd, b, at + 4)
        ty, off = struct.unpack_from("<IQ", b, at + 4 + 8 * nd)
        at += 4 + 8 * nd + 12
        infos.append((name, dims, ty, off))
    base = (at + 31) // 32 * 32
    block = {0: (1, 4), 12: (256, 144), 13: (256, 176), 14: (256, 210)}
    out = {}
    for name, dims, ty, off in infos:
        per, size = block[ty]
        out[name] = b[base + off:base + off + int(np.prod(dims)) // per * size]
    return out


if __name__ == "__main__":
    main()
