"""The Triton kernels of the fused Llama-family step (harness/llama_ops.py calls them and holds
their torch references). Each rounds to the model's dtype where HF's modules do, so that in bf16
the step stays close to HF's and in fp32 it differs only in summation order.

_gemv_kernel: out = x W^T for B <= BLOCK_M rows (a GEMV: memory-bound, one program per BLOCK_N
    output columns, the whole K loop in it: no split-K, no second kernel), with, by constexpr:
    NORM      RMSNorm of x in the prologue (each program sums x^2 of the B rows: they sit in L2)
    HAS_BIAS  + bias in the epilogue (HAS_BIAS2: + b2 for W2)
    GLU       a second weight W2 (the up projection): out = silu(x W^T + b) * (x W2^T + b2)
    RESIDUAL  out += the product, in place (out is the residual stream x)
    ARGMAX    no output: each program's row maxima and their columns (the greedy token's partials)
    SPLIT     > 1: the K loop cut in SPLIT slices, a program each (grid axis 1), each slice's fp32
              sums into part [SPLIT, B, N] and no epilogue: _split_sum_kernel adds the slices, the
              bias and the residual (more programs in flight where N alone gives too few)
_rope_attention_kernel: one program per (sequence, query head): rotary on q and on the k of its KV
    head, K and V written at pos (by the group's first head only), softmax(q K / sqrt d) V over
    slots 0..pos with an online softmax, BLOCK_T slots at a time. Heads in halves (rotate_half).
_split_sum_norm_kernel: _split_sum_kernel's sum into the residual x, then RMSNorm of the new x
    (HF's rounding) into h, one program a row: the next projection's input with no norm kernel.
_silu_mul_kernel: g = silu(gate + b) * (up + b2), after a cuBLAS GEMM of gate and up side by side.
_split_sum_kernel: out (+)= round(sum of the SPLIT slices + bias), in the dtype: the split GEMV's
    epilogue (the slices in order: the same sum every run).
_advance_kernel: the greedy token from the partials, then decode.advance_tokens' bookkeeping (stop
    schedule, finished mask, ids, token, done, flag, pos) in one program: ~12 kernels as one.
"""

from .triton_ops import triton

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _gemv_kernel(x_ptr, nw_ptr, w_ptr, w2_ptr, b_ptr, b2_ptr, out_ptr, pmax_ptr, pidx_ptr,
                     part_ptr, B, N, K, k_slice, s_x, s_w, s_w2, s_out, s_p, eps,
                     NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_BIAS2: tl.constexpr,
                     GLU: tl.constexpr,
                     RESIDUAL: tl.constexpr, ARGMAX: tl.constexpr, IEEE: tl.constexpr,
                     SPLIT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid = tl.program_id(0)
        m = tl.arange(0, BLOCK_M)
        n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = tl.arange(0, BLOCK_K)
        rows = m < B
        cols = n < N
        dt = x_ptr.dtype.element_ty
        if NORM:
            ss = tl.zeros([BLOCK_M], tl.float32)
            for k0 in range(0, K, BLOCK_K):
                k = k0 + kk
                xk = tl.load(x_ptr + m[:, None] * s_x + k[None, :],
                             mask=rows[:, None] & (k < K)[None, :], other=0.0).to(tl.float32)
                ss += tl.sum(xk * xk, axis=1)
            rstd = tl.rsqrt(ss / K + eps)  # HF: x * rsqrt(mean(x^2) + eps), in fp32
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        acc2 = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        k_lo = tl.program_id(1) * k_slice  # k_slice: K when SPLIT is 1
        for k0 in range(k_lo, tl.minimum(k_lo + k_slice, K), BLOCK_K):
            k = k0 + kk
            kin = k < K
            xk = tl.load(x_ptr + m[:, None] * s_x + k[None, :], mask=rows[:, None] & kin[None, :],
                         other=0.0)
            if NORM:  # HF: weight * (x * rstd).to(dtype)
                h = (xk.to(tl.float32) * rstd[:, None]).to(dt)
                xk = (tl.load(nw_ptr + k, mask=kin, other=0.0)[None, :] * h).to(dt)
            wk = tl.load(w_ptr + n[:, None] * s_w + k[None, :], mask=cols[:, None] & kin[None, :],
                         other=0.0)
            if IEEE:
                acc = tl.dot(xk, tl.trans(wk), acc, input_precision="ieee")
            else:
                acc = tl.dot(xk, tl.trans(wk), acc)
            if GLU:
                wk2 = tl.load(w2_ptr + n[:, None] * s_w2 + k[None, :],
                              mask=cols[:, None] & kin[None, :], other=0.0)
                if IEEE:
                    acc2 = tl.dot(xk, tl.trans(wk2), acc2, input_precision="ieee")
                else:
                    acc2 = tl.dot(xk, tl.trans(wk2), acc2)
        if SPLIT > 1:
            where = part_ptr + (tl.program_id(1) * B + m[:, None]) * N + n[None, :]
            tl.store(where, acc, mask=rows[:, None] & cols[None, :])
        else:
            if HAS_BIAS:
                acc += tl.load(b_ptr + n, mask=cols, other=0.0).to(tl.float32)[None, :]
            if HAS_BIAS2:
                acc2 += tl.load(b2_ptr + n, mask=cols, other=0.0).to(tl.float32)[None, :]
            out = acc.to(dt)  # the GEMM's output in the dtype, as cuBLAS rounds it
            if ARGMAX:
                logits = tl.where(cols[None, :], out.to(tl.float32), float("-inf"))
                best = tl.argmax(logits, axis=1)  # the first column of the maximum, as torch's
                tl.store(pmax_ptr + m * s_p + pid, tl.max(logits, axis=1), mask=rows)
                tl.store(pidx_ptr + m * s_p + pid, (pid * BLOCK_N + best).to(tl.int64), mask=rows)
            else:
                where = out_ptr + m[:, None] * s_out + n[None, :]
                inside = rows[:, None] & cols[None, :]
                if GLU:  # HF: act_fn(gate) * up, each rounded to the dtype
                    gate = out.to(tl.float32)
                    out = (gate / (1.0 + tl.exp(-gate))).to(dt) * acc2.to(dt)
                if RESIDUAL:  # HF: residual + proj(y)
                    out = tl.load(where, mask=inside, other=0.0) + out
                tl.store(where, out.to(dt), mask=inside)

    @triton.jit
    def _split_sum_kernel(part_ptr, b_ptr, out_ptr, BN, N, s_out, SPLIT: tl.constexpr,
                          HAS_BIAS: tl.constexpr, RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # over B x N
        inside = i < BN
        acc = tl.zeros([BLOCK], tl.float32)
        for s in range(SPLIT):
            acc += tl.load(part_ptr + s * BN + i, mask=inside, other=0.0)
        col = i % N
        if HAS_BIAS:
            acc += tl.load(b_ptr + col, mask=inside, other=0.0).to(tl.float32)
        dt = out_ptr.dtype.element_ty
        where = out_ptr + (i // N) * s_out + col
        out = acc.to(dt)
        if RESIDUAL:
            out = tl.load(where, mask=inside, other=0.0) + out
        tl.store(where, out.to(dt), mask=inside)

    @triton.jit
    def _split_sum_norm_kernel(part_ptr, b_ptr, out_ptr, nw_ptr, h_ptr, B, N, s_out, s_h, eps,
                               SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr,
                               BLOCK_N: tl.constexpr):
        r = tl.program_id(0)  # one row: the norm needs all of it
        c = tl.arange(0, BLOCK_N)
        inside = c < N
        acc = tl.zeros([BLOCK_N], tl.float32)
        for s in range(SPLIT):  # in order, as _split_sum_kernel
            acc += tl.load(part_ptr + (s * B + r) * N + c, mask=inside, other=0.0)
        if HAS_BIAS:
            acc += tl.load(b_ptr + c, mask=inside, other=0.0).to(tl.float32)
        dt = out_ptr.dtype.element_ty
        where = out_ptr + r * s_out + c
        x = (tl.load(where, mask=inside, other=0.0) + acc.to(dt)).to(dt)
        tl.store(where, x, mask=inside)
        xf = x.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / N + eps)  # HF: x * rsqrt(mean(x^2) + eps)
        nw = tl.load(nw_ptr + c, mask=inside, other=0.0)
        tl.store(h_ptr + r * s_h + c, (nw * (xf * rstd).to(dt)).to(dt), mask=inside)

    @triton.jit
    def _rotate(x1, x2, c, s, dt: tl.constexpr):
        return (((x1 * c).to(dt) - (x2 * s).to(dt)).to(dt),
                ((x2 * c).to(dt) + (x1 * s).to(dt)).to(dt))

    @triton.jit
    def _rope_attention_kernel(qkv_ptr, bias_ptr, cos_ptr, sin_ptr, k_ptr, v_ptr, out_ptr, pos_ptr,
                               s_qkv, s_b, s_h, s_t, s_out, scale, H: tl.constexpr,
                               KVH: tl.constexpr, HALF: tl.constexpr, HALF_P: tl.constexpr,
                               HAS_BIAS: tl.constexpr, BLOCK_T: tl.constexpr):
        b = tl.program_id(0)
        h = tl.program_id(1)
        g = h // (H // KVH)  # the KV head this query head shares (HF's repeat_kv)
        pos = tl.load(pos_ptr)
        j = tl.arange(0, HALF_P)
        jm = j < HALF
        dt = qkv_ptr.dtype.element_ty
        # cos[pos] (both halves equal) and sin[pos] (the table's second half: unsigned)
        c = tl.load(cos_ptr + pos * 2 * HALF + j, mask=jm, other=0.0)
        s = tl.load(sin_ptr + pos * 2 * HALF + HALF + j, mask=jm, other=0.0)
        row = qkv_ptr + b * s_qkv
        q1 = tl.load(row + h * 2 * HALF + j, mask=jm, other=0.0)
        q2 = tl.load(row + h * 2 * HALF + HALF + j, mask=jm, other=0.0)
        kq = (H + g) * 2 * HALF
        vq = (H + KVH + g) * 2 * HALF
        k1 = tl.load(row + kq + j, mask=jm, other=0.0)
        k2 = tl.load(row + kq + HALF + j, mask=jm, other=0.0)
        v1 = tl.load(row + vq + j, mask=jm, other=0.0)
        v2 = tl.load(row + vq + HALF + j, mask=jm, other=0.0)
        if HAS_BIAS:
            q1 = (q1 + tl.load(bias_ptr + h * 2 * HALF + j, mask=jm, other=0.0)).to(dt)
            q2 = (q2 + tl.load(bias_ptr + h * 2 * HALF + HALF + j, mask=jm, other=0.0)).to(dt)
            k1 = (k1 + tl.load(bias_ptr + kq + j, mask=jm, other=0.0)).to(dt)
            k2 = (k2 + tl.load(bias_ptr + kq + HALF + j, mask=jm, other=0.0)).to(dt)
            v1 = (v1 + tl.load(bias_ptr + vq + j, mask=jm, other=0.0)).to(dt)
            v2 = (v2 + tl.load(bias_ptr + vq + HALF + j, mask=jm, other=0.0)).to(dt)
        # HF: x * cos + rotate_half(x) * sin, each product and the sum rounded to the dtype
        q1, q2 = _rotate(q1, q2, c, s, dt)
        k1, k2 = _rotate(k1, k2, c, s, dt)
        base = b * s_b + g * s_h
        if h % (H // KVH) == 0:  # one writer per KV head; the others use k, v from registers
            tl.store(k_ptr + base + pos * s_t + j, k1, mask=jm)
            tl.store(k_ptr + base + pos * s_t + HALF + j, k2, mask=jm)
            tl.store(v_ptr + base + pos * s_t + j, v1, mask=jm)
            tl.store(v_ptr + base + pos * s_t + HALF + j, v2, mask=jm)
        q1 = q1.to(tl.float32) * scale
        q2 = q2.to(tl.float32) * scale
        m_run = tl.full([], float("-inf"), tl.float32)  # running max of the scores
        total = tl.full([], 0.0, tl.float32)  # running sum of exp(score - m)
        acc1 = tl.zeros([HALF_P], dtype=tl.float32)
        acc2 = tl.zeros([HALF_P], dtype=tl.float32)
        for t0 in range(0, pos + 1, BLOCK_T):
            t = t0 + tl.arange(0, BLOCK_T)
            older = (t < pos)[:, None] & jm[None, :]  # slot pos: this program's registers
            is_new = (t == pos)[:, None]
            offs = base + t[:, None] * s_t + j[None, :]
            kt1 = tl.where(is_new, k1[None, :], tl.load(k_ptr + offs, mask=older, other=0.0))
            kt2 = tl.where(is_new, k2[None, :], tl.load(k_ptr + offs + HALF, mask=older, other=0.0))
            score = (tl.sum(kt1.to(tl.float32) * q1[None, :], axis=1)
                     + tl.sum(kt2.to(tl.float32) * q2[None, :], axis=1))  # [BLOCK_T]
            score = tl.where(t <= pos, score, float("-inf"))
            m_new = tl.maximum(m_run, tl.max(score, axis=0))
            p = tl.exp(score - m_new)
            keep = tl.exp(m_run - m_new)
            total = total * keep + tl.sum(p, axis=0)
            vt1 = tl.where(is_new, v1[None, :], tl.load(v_ptr + offs, mask=older, other=0.0))
            vt2 = tl.where(is_new, v2[None, :], tl.load(v_ptr + offs + HALF, mask=older, other=0.0))
            acc1 = acc1 * keep + tl.sum(p[:, None] * vt1.to(tl.float32), axis=0)
            acc2 = acc2 * keep + tl.sum(p[:, None] * vt2.to(tl.float32), axis=0)
            m_run = m_new
        out = out_ptr + b * s_out + h * 2 * HALF + j
        tl.store(out, (acc1 / total).to(out_ptr.dtype.element_ty), mask=jm)
        tl.store(out + HALF, (acc2 / total).to(out_ptr.dtype.element_ty), mask=jm)

    @triton.jit
    def _silu_mul_kernel(gu_ptr, b_ptr, out_ptr, n, width, HAS_BIAS: tl.constexpr,
                         BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = i < n
        row = i // width
        col = i % width
        dt = out_ptr.dtype.element_ty
        gate = tl.load(gu_ptr + row * 2 * width + col, mask=inside, other=0.0)
        up = tl.load(gu_ptr + row * 2 * width + width + col, mask=inside, other=0.0)
        if HAS_BIAS:
            gate = (gate + tl.load(b_ptr + col, mask=inside, other=0.0)).to(dt)
            up = (up + tl.load(b_ptr + width + col, mask=inside, other=0.0)).to(dt)
        gate = gate.to(tl.float32)
        tl.store(out_ptr + i, (gate / (1.0 + tl.exp(-gate))).to(dt) * up, mask=inside)

    @triton.jit
    def _advance_kernel(pmax_ptr, pidx_ptr, nb, s_p, ids_ptr, s_ids, token_ptr, pos_ptr, fin_ptr,
                        done_ptr, stops_ptr, eos_ptr, flag_ptr, B, E, eos_forced,
                        BLOCK_B: tl.constexpr, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
        r = tl.arange(0, BLOCK_B)
        rows = r < B
        best = tl.full([BLOCK_B], float("-inf"), tl.float32)
        nxt = tl.zeros([BLOCK_B], tl.int64)
        for c0 in range(0, nb, CHUNK):  # the blocks in order: a later one wins only if greater
            c = c0 + tl.arange(0, CHUNK)
            vals = tl.load(pmax_ptr + r[:, None] * s_p + c[None, :],
                           mask=rows[:, None] & (c < nb)[None, :], other=float("-inf"))
            vals = vals.to(tl.float32)
            top = tl.max(vals, axis=1)
            col = tl.load(pidx_ptr + r * s_p + c0 + tl.argmax(vals, axis=1), mask=rows, other=0)
            nxt = tl.where(top > best, col, nxt)
            best = tl.maximum(best, top)
        step = tl.load(pos_ptr) + 1
        fin = tl.load(fin_ptr + r, mask=rows, other=1) != 0
        stops = tl.load(stops_ptr + r, mask=rows, other=0)
        nxt = tl.where(fin | (step >= stops), eos_forced, nxt)
        e = tl.arange(0, BLOCK_E)
        eos = tl.load(eos_ptr + e, mask=e < E, other=-1)
        fin = fin | (tl.max((nxt[:, None] == eos[None, :]).to(tl.int32), axis=1) > 0)
        tl.store(fin_ptr + r, fin.to(tl.uint8), mask=rows)
        tl.store(ids_ptr + r * s_ids + step, nxt, mask=rows)
        tl.store(token_ptr + r, nxt, mask=rows)
        all_done = (tl.min(tl.where(rows, fin.to(tl.int32), 1), axis=0) > 0).to(tl.uint8)
        tl.store(done_ptr + step, all_done)
        tl.store(flag_ptr, all_done)
        tl.store(pos_ptr, step)
