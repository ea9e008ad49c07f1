"""The megakernel (issue 42): a whole Llama-family decode step in one persistent Triton launch.

One program per SM walks its list of the schedule's tasks (harness/mega_schedule.py). Before a
task waits on its counter it issues the loads of its first block of weights (they depend on
nothing), so that HBM is busy while the phase before it finishes: the wait a kernel boundary
would be, overlapped with the next weights. A task's inputs written by other programs in this
launch are read with `.cg` (from L2, past the SM's L1, which is not coherent between SMs); its
outputs are published by a barrier of the program's threads, then one release add to the
counter. The math of each task is the fused step's (harness/llama_kernels.py), tile by tile,
and in fp32 at "highest" its tokens are `kv`'s; in bf16 the one-row GEMVs add each dot product
in another order than fused's kernels, so a near tie between two logits can go the other way.

A wait spins at most SPIN reads of its counter; past that it marks `err` and goes on, so a wrong
schedule or a GPU shared with a kernel that keeps SMs forever ends in an error, not a hang.

Weights are HF's own tensors (the joined QKV and gate/up copies that `fused` uses too), reached
through a table of addresses per layer (LAYER_FIELDS int64 a layer).
"""

from .triton_ops import triton

# The per-layer address table's columns.
W_QKV, B_QKV, W_O, W_GATE_UP, W_DOWN, N_IN, N_POST = range(7)
LAYER_FIELDS = 7

if triton is not None:
    import triton.language as tl

    from . import mega_schedule as S

    # Triton reads module globals only as constexprs.
    K_EMBED, K_QKV, K_ATTN, K_O = (tl.constexpr(S.EMBED), tl.constexpr(S.QKV),
                                   tl.constexpr(S.ATTN), tl.constexpr(S.O))
    K_GLU, K_DOWN, K_HEAD, K_ADVANCE = (tl.constexpr(S.GLU), tl.constexpr(S.DOWN),
                                        tl.constexpr(S.HEAD), tl.constexpr(S.ADVANCE))
    FIELDS = tl.constexpr(S.TASK_FIELDS)
    F_QKV, F_BQKV, F_O, F_GATE_UP = (tl.constexpr(W_QKV), tl.constexpr(B_QKV), tl.constexpr(W_O),
                                     tl.constexpr(W_GATE_UP))
    F_DOWN, F_IN, F_POST, F_ALL = (tl.constexpr(W_DOWN), tl.constexpr(N_IN), tl.constexpr(N_POST),
                                   tl.constexpr(LAYER_FIELDS))

    @triton.jit
    def _wait(ctr_ptr, target, err_ptr, SPIN: tl.constexpr):
        """Until the counter reaches target (an acquire read at GPU scope), or SPIN reads."""
        seen = tl.atomic_add(ctr_ptr, 0, sem="acquire", scope="gpu")
        spins = tl.full([], 0, tl.int32)
        while (seen < target) & (spins < SPIN):
            seen = tl.atomic_add(ctr_ptr, 0, sem="acquire", scope="gpu")
            spins += 1
        if seen < target:
            tl.atomic_max(err_ptr, 1)

    @triton.jit
    def _signal(ctr_ptr):
        """This program's stores, then +1 on the counter (the barrier orders every thread's
        stores before the one release add)."""
        tl.debug_barrier()
        tl.atomic_add(ctr_ptr, 1, sem="release", scope="gpu")

    @triton.jit
    def _ptr(layer_ptr, layer, field, like):
        """A layer's tensor address from the table, as a pointer to `like`'s element type."""
        addr = tl.load(layer_ptr + layer * F_ALL + field)
        return addr.to(tl.pointer_type(like.dtype.element_ty))

    @triton.jit
    def _dot(a, w, acc, IEEE: tl.constexpr):
        if IEEE:
            return tl.dot(a, tl.trans(w), acc, input_precision="ieee")
        return tl.dot(a, tl.trans(w), acc)

    @triton.jit
    def _x_chunk(x_ptr, s_x, m, rows, k, kin, nw_ptr, rstd, NORM: tl.constexpr):
        """A block of the GEMV's input rows (written in this launch: from L2), normed if NORM
        (HF: weight * (x * rstd).to(dtype))."""
        xk = tl.load(x_ptr + m[:, None] * s_x + k[None, :], mask=rows[:, None] & kin[None, :],
                     other=0.0, cache_modifier=".cg")
        if NORM:
            dt = x_ptr.dtype.element_ty
            h = (xk.to(tl.float32) * rstd[:, None]).to(dt)
            xk = (tl.load(nw_ptr + k, mask=kin, other=0.0)[None, :] * h).to(dt)
        return xk

    @triton.jit
    def _x_vec(x_ptr, k, kin, nw_ptr, rstd, NORM: tl.constexpr):
        """_x_chunk for one row: a block of x [BLOCK_K], normed if NORM."""
        xk = tl.load(x_ptr + k, mask=kin, other=0.0, cache_modifier=".cg")
        if NORM:
            dt = x_ptr.dtype.element_ty
            h = (xk.to(tl.float32) * rstd).to(dt)
            xk = (tl.load(nw_ptr + k, mask=kin, other=0.0) * h).to(dt)
        return xk

    @triton.jit
    def _w_block(w_ptr, n, cols, k, K):
        return tl.load(w_ptr + n[:, None] * K + k[None, :], mask=cols[:, None] & (k < K)[None, :],
                       other=0.0)

    @triton.jit
    def _gemv_task(tile, x_ptr, s_x, nw_ptr, eps, w_ptr, b_ptr, out_ptr, s_out, pmax_ptr,
                   pidx_ptr, s_p, B, N, K, ctr_ptr, target, err_ptr,
                   NORM: tl.constexpr, HAS_BIAS: tl.constexpr, GLU_: tl.constexpr,
                   RESIDUAL: tl.constexpr, ARGMAX: tl.constexpr, IEEE: tl.constexpr,
                   FMA: tl.constexpr, SPIN: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_P: tl.constexpr):
        """out[:, tile] = x W^T for one block of columns (llama_kernels._gemv_kernel's math);
        GLU_: W holds gate then up (N rows each). The next block of weights is always in flight
        while one is multiplied (loaded a loop turn ahead), the first before the wait.
        FMA (one row): fp32 products summed in registers, no tl.dot (whose 16 rows would be 15
        of padding) and no trip through shared memory; else a tl.dot of up to 16 rows.
        K_P: K's next power of 2, for the norm's one read of a row."""
        m = tl.arange(0, BLOCK_M)
        n = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = tl.arange(0, BLOCK_K)
        rows = m < B
        cols = n < N
        dt = x_ptr.dtype.element_ty
        # The first block of weights, before the wait: it depends on nothing.
        w_cur = _w_block(w_ptr, n, cols, kk, K)
        v_cur = w_cur
        if GLU_:
            v_cur = _w_block(w_ptr, N + n, cols, kk, K)
        _wait(ctr_ptr, target, err_ptr, SPIN)
        rstd = tl.zeros([BLOCK_M], tl.float32)
        if NORM:  # HF: x * rsqrt(mean(x^2) + eps), in fp32; each row read once, whole
            kp = tl.arange(0, K_P)
            for r in range(0, B):
                xr = tl.load(x_ptr + r * s_x + kp, mask=kp < K, other=0.0,
                             cache_modifier=".cg").to(tl.float32)
                rstd = tl.where(m == r, tl.rsqrt(tl.sum(xr * xr, axis=0) / K + eps), rstd)
        if FMA:
            r0 = tl.sum(tl.where(m == 0, rstd, 0.0), axis=0)
            x_cur = _x_vec(x_ptr, kk, kk < K, nw_ptr, r0, NORM)
            acc_w = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
            acc_v = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
            for k0 in range(BLOCK_K, K, BLOCK_K):
                k = k0 + kk
                w_nxt = _w_block(w_ptr, n, cols, k, K)
                v_nxt = w_nxt
                if GLU_:
                    v_nxt = _w_block(w_ptr, N + n, cols, k, K)
                x_nxt = _x_vec(x_ptr, k, k < K, nw_ptr, r0, NORM)
                xf = x_cur.to(tl.float32)[None, :]
                acc_w += w_cur.to(tl.float32) * xf
                if GLU_:
                    acc_v += v_cur.to(tl.float32) * xf
                w_cur, v_cur, x_cur = w_nxt, v_nxt, x_nxt
            xf = x_cur.to(tl.float32)[None, :]
            acc_w += w_cur.to(tl.float32) * xf
            acc = tl.where(m[:, None] == 0, tl.sum(acc_w, axis=1)[None, :], 0.0)
            acc2 = acc
            if GLU_:
                acc_v += v_cur.to(tl.float32) * xf
                acc2 = tl.where(m[:, None] == 0, tl.sum(acc_v, axis=1)[None, :], 0.0)
        else:
            x_cur = _x_chunk(x_ptr, s_x, m, rows, kk, kk < K, nw_ptr, rstd, NORM)
            acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            acc2 = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            for k0 in range(BLOCK_K, K, BLOCK_K):
                k = k0 + kk
                w_nxt = _w_block(w_ptr, n, cols, k, K)
                v_nxt = w_nxt
                if GLU_:
                    v_nxt = _w_block(w_ptr, N + n, cols, k, K)
                x_nxt = _x_chunk(x_ptr, s_x, m, rows, k, k < K, nw_ptr, rstd, NORM)
                acc = _dot(x_cur, w_cur, acc, IEEE)
                if GLU_:
                    acc2 = _dot(x_cur, v_cur, acc2, IEEE)
                w_cur, v_cur, x_cur = w_nxt, v_nxt, x_nxt
            acc = _dot(x_cur, w_cur, acc, IEEE)
            if GLU_:
                acc2 = _dot(x_cur, v_cur, acc2, IEEE)
        if HAS_BIAS:
            acc += tl.load(b_ptr + n, mask=cols, other=0.0).to(tl.float32)[None, :]
        out = acc.to(dt)  # the GEMM's output in the dtype, as cuBLAS rounds it
        if ARGMAX:
            logits = tl.where(cols[None, :], out.to(tl.float32), float("-inf"))
            best = tl.argmax(logits, axis=1)  # the first column of the maximum, as torch's
            tl.store(pmax_ptr + m * s_p + tile, tl.max(logits, axis=1), mask=rows)
            tl.store(pidx_ptr + m * s_p + tile, (tile * BLOCK_N + best).to(tl.int64), mask=rows)
        else:
            where = out_ptr + m[:, None] * s_out + n[None, :]
            inside = rows[:, None] & cols[None, :]
            if GLU_:  # HF: act_fn(gate) * up, each rounded to the dtype
                gate = out.to(tl.float32)
                out = (gate / (1.0 + tl.exp(-gate))).to(dt) * acc2.to(dt)
            if RESIDUAL:  # HF: residual + proj(y)
                out = tl.load(where, mask=inside, other=0.0, cache_modifier=".cg") + out
            tl.store(where, out.to(dt), mask=inside)

    @triton.jit
    def _rotate(x1, x2, c, s, dt: tl.constexpr):
        return (((x1 * c).to(dt) - (x2 * s).to(dt)).to(dt),
                ((x2 * c).to(dt) + (x1 * s).to(dt)).to(dt))

    @triton.jit
    def _attention_task(tile, qkv_ptr, bias_ptr, cos_ptr, sin_ptr, k_ptr, v_ptr, out_ptr, pos_ptr,
                        s_qkv, s_b, s_h, s_t, s_out, scale, ctr_ptr, target, err_ptr,
                        H: tl.constexpr, KVH: tl.constexpr, HALF: tl.constexpr,
                        HALF_P: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_T: tl.constexpr,
                        SPIN: tl.constexpr):
        """One (row, query head): llama_kernels._rope_attention_kernel's math. The K and V it
        writes at pos (the group's first head writes them) no other task reads in this launch:
        the group's other heads take theirs from the qkv row."""
        b = tile // H
        h = tile % H
        g = h // (H // KVH)  # the KV head this query head shares (HF's repeat_kv)
        pos = tl.load(pos_ptr)
        j = tl.arange(0, HALF_P)
        jm = j < HALF
        dt = qkv_ptr.dtype.element_ty
        c = tl.load(cos_ptr + pos * 2 * HALF + j, mask=jm, other=0.0)
        s = tl.load(sin_ptr + pos * 2 * HALF + HALF + j, mask=jm, other=0.0)
        _wait(ctr_ptr, target, err_ptr, SPIN)
        row = qkv_ptr + b * s_qkv
        kq = (H + g) * 2 * HALF
        vq = (H + KVH + g) * 2 * HALF
        q1 = tl.load(row + h * 2 * HALF + j, mask=jm, other=0.0, cache_modifier=".cg")
        q2 = tl.load(row + h * 2 * HALF + HALF + j, mask=jm, other=0.0, cache_modifier=".cg")
        k1 = tl.load(row + kq + j, mask=jm, other=0.0, cache_modifier=".cg")
        k2 = tl.load(row + kq + HALF + j, mask=jm, other=0.0, cache_modifier=".cg")
        v1 = tl.load(row + vq + j, mask=jm, other=0.0, cache_modifier=".cg")
        v2 = tl.load(row + vq + HALF + j, mask=jm, other=0.0, cache_modifier=".cg")
        if HAS_BIAS:
            q1 = (q1 + tl.load(bias_ptr + h * 2 * HALF + j, mask=jm, other=0.0)).to(dt)
            q2 = (q2 + tl.load(bias_ptr + h * 2 * HALF + HALF + j, mask=jm, other=0.0)).to(dt)
            k1 = (k1 + tl.load(bias_ptr + kq + j, mask=jm, other=0.0)).to(dt)
            k2 = (k2 + tl.load(bias_ptr + kq + HALF + j, mask=jm, other=0.0)).to(dt)
            v1 = (v1 + tl.load(bias_ptr + vq + j, mask=jm, other=0.0)).to(dt)
            v2 = (v2 + tl.load(bias_ptr + vq + HALF + j, mask=jm, other=0.0)).to(dt)
        q1, q2 = _rotate(q1, q2, c, s, dt)
        k1, k2 = _rotate(k1, k2, c, s, dt)
        base = b * s_b + g * s_h
        if h % (H // KVH) == 0:
            tl.store(k_ptr + base + pos * s_t + j, k1, mask=jm)
            tl.store(k_ptr + base + pos * s_t + HALF + j, k2, mask=jm)
            tl.store(v_ptr + base + pos * s_t + j, v1, mask=jm)
            tl.store(v_ptr + base + pos * s_t + HALF + j, v2, mask=jm)
        q1 = q1.to(tl.float32) * scale
        q2 = q2.to(tl.float32) * scale
        m_run = tl.full([], float("-inf"), tl.float32)
        total = tl.full([], 0.0, tl.float32)
        acc1 = tl.zeros([HALF_P], dtype=tl.float32)
        acc2 = tl.zeros([HALF_P], dtype=tl.float32)
        for t0 in range(0, pos + 1, BLOCK_T):
            t = t0 + tl.arange(0, BLOCK_T)
            older = (t < pos)[:, None] & jm[None, :]  # slot pos: this task's registers
            is_new = (t == pos)[:, None]
            offs = base + t[:, None] * s_t + j[None, :]
            kt1 = tl.where(is_new, k1[None, :], tl.load(k_ptr + offs, mask=older, other=0.0))
            kt2 = tl.where(is_new, k2[None, :], tl.load(k_ptr + offs + HALF, mask=older,
                                                        other=0.0))
            score = (tl.sum(kt1.to(tl.float32) * q1[None, :], axis=1)
                     + tl.sum(kt2.to(tl.float32) * q2[None, :], axis=1))
            score = tl.where(t <= pos, score, float("-inf"))
            m_new = tl.maximum(m_run, tl.max(score, axis=0))
            p = tl.exp(score - m_new)
            keep = tl.exp(m_run - m_new)
            total = total * keep + tl.sum(p, axis=0)
            vt1 = tl.where(is_new, v1[None, :], tl.load(v_ptr + offs, mask=older, other=0.0))
            vt2 = tl.where(is_new, v2[None, :], tl.load(v_ptr + offs + HALF, mask=older,
                                                        other=0.0))
            acc1 = acc1 * keep + tl.sum(p[:, None] * vt1.to(tl.float32), axis=0)
            acc2 = acc2 * keep + tl.sum(p[:, None] * vt2.to(tl.float32), axis=0)
            m_run = m_new
        out = out_ptr + b * s_out + h * 2 * HALF + j
        tl.store(out, (acc1 / total).to(out_ptr.dtype.element_ty), mask=jm)
        tl.store(out + HALF, (acc2 / total).to(out_ptr.dtype.element_ty), mask=jm)

    @triton.jit
    def _embed_task(b, embed_ptr, token_ptr, x_ptr, s_x, C, ctr_ptr, target, err_ptr,
                    BLOCK_C: tl.constexpr, SPIN: tl.constexpr):
        _wait(ctr_ptr, target, err_ptr, SPIN)
        tok = tl.load(token_ptr + b)
        for c0 in range(0, C, BLOCK_C):
            c = c0 + tl.arange(0, BLOCK_C)
            tl.store(x_ptr + b * s_x + c, tl.load(embed_ptr + tok * C + c, mask=c < C),
                     mask=c < C)

    @triton.jit
    def _advance_task(pmax_ptr, pidx_ptr, nb, s_p, ids_ptr, s_ids, token_ptr, pos_ptr, fin_ptr,
                      done_ptr, stops_ptr, eos_ptr, flag_ptr, B, E, eos_forced, ctr_ptr, target,
                      err_ptr, counters_ptr, n_counters,
                      BLOCK_B: tl.constexpr, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr,
                      BLOCK_CTR: tl.constexpr, SPIN: tl.constexpr):
        """llama_kernels._advance_kernel's math, then every counter back to 0: the head's tasks
        were the last to wait, so no program reads a counter any more."""
        _wait(ctr_ptr, target, err_ptr, SPIN)
        r = tl.arange(0, BLOCK_B)
        rows = r < B
        best = tl.full([BLOCK_B], float("-inf"), tl.float32)
        nxt = tl.zeros([BLOCK_B], tl.int64)
        for c0 in range(0, nb, CHUNK):
            c = c0 + tl.arange(0, CHUNK)
            vals = tl.load(pmax_ptr + r[:, None] * s_p + c[None, :],
                           mask=rows[:, None] & (c < nb)[None, :], other=float("-inf"),
                           cache_modifier=".cg")
            vals = vals.to(tl.float32)
            top = tl.max(vals, axis=1)
            col = tl.load(pidx_ptr + r * s_p + c0 + tl.argmax(vals, axis=1), mask=rows, other=0,
                          cache_modifier=".cg")
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
        ci = tl.arange(0, BLOCK_CTR)
        tl.store(counters_ptr + ci, tl.zeros([BLOCK_CTR], tl.int32), mask=ci < n_counters)

    @triton.jit
    def _mega_kernel(
            lists_ptr, counts_ptr, tasks_ptr, targets_ptr, ctr_ptr, err_ptr, most, n_counters,
            layer_ptr, embed_ptr, fnorm_ptr, head_ptr, head_b_ptr,
            x_ptr, qkv_ptr, y_ptr, g_ptr, pmax_ptr, pidx_ptr, n_head_tiles,
            k_ptr, v_ptr, s_l, s_b, s_h, s_t, cos_ptr, sin_ptr,
            token_ptr, pos_ptr, ids_ptr, s_ids, fin_ptr, done_ptr, stops_ptr, eos_ptr, flag_ptr,
            B, E, eos_forced, eps, eps_final, scale,
            C: tl.constexpr, I: tl.constexpr, NQKV: tl.constexpr, V: tl.constexpr,  # noqa: E741
            H: tl.constexpr, KVH: tl.constexpr, HALF: tl.constexpr, HALF_P: tl.constexpr,
            QKV_BIAS: tl.constexpr, HEAD_BIAS: tl.constexpr, IEEE: tl.constexpr,
            BN_QKV: tl.constexpr, BN_O: tl.constexpr, BN_GLU: tl.constexpr,
            BN_DOWN: tl.constexpr, BN_HEAD: tl.constexpr, BK_QKV: tl.constexpr,
            BK_O: tl.constexpr, BK_GLU: tl.constexpr, BK_DOWN: tl.constexpr, BK_HEAD: tl.constexpr,
            FMA: tl.constexpr, C_P: tl.constexpr, I_P: tl.constexpr, HD_P: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
            BLOCK_B: tl.constexpr, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr,
            BLOCK_CTR: tl.constexpr, SPIN: tl.constexpr):
        pid = tl.program_id(0)
        for i in range(0, most):  # the list is padded with -1 (the interpreter wants a plain
            t = tl.load(lists_ptr + pid * most + i)  # bound)
            if t >= 0:
                kind = tl.load(tasks_ptr + t * FIELDS)
                layer = tl.load(tasks_ptr + t * FIELDS + 1)
                tile = tl.load(tasks_ptr + t * FIELDS + 2)
                phase = tl.load(tasks_ptr + t * FIELDS + 3)
                wait_ptr = ctr_ptr + phase
                target = tl.load(targets_ptr + phase)
                if kind == K_QKV:
                    _gemv_task(tile, x_ptr, C, _ptr(layer_ptr, layer, F_IN, x_ptr), eps,
                               _ptr(layer_ptr, layer, F_QKV, x_ptr),
                               _ptr(layer_ptr, layer, F_BQKV, x_ptr), qkv_ptr, NQKV, pmax_ptr,
                               pidx_ptr, 0, B, NQKV, C, wait_ptr, target, err_ptr,
                               NORM=True, HAS_BIAS=QKV_BIAS, GLU_=False, RESIDUAL=False,
                               ARGMAX=False, IEEE=IEEE, SPIN=SPIN, BLOCK_M=BLOCK_M, BLOCK_N=BN_QKV,
                               BLOCK_K=BK_QKV, FMA=FMA, K_P=C_P)
                elif kind == K_ATTN:
                    _attention_task(tile, qkv_ptr, qkv_ptr, cos_ptr, sin_ptr, k_ptr + layer * s_l,
                                    v_ptr + layer * s_l, y_ptr, pos_ptr, NQKV, s_b, s_h, s_t, H * 2
                                    * HALF, scale, wait_ptr, target, err_ptr, H=H, KVH=KVH,
                                    HALF=HALF, HALF_P=HALF_P, HAS_BIAS=False, BLOCK_T=BLOCK_T,
                                    SPIN=SPIN)
                elif kind == K_O:
                    _gemv_task(tile, y_ptr, H * 2 * HALF, x_ptr, eps,
                               _ptr(layer_ptr, layer, F_O, x_ptr), x_ptr, x_ptr, C, pmax_ptr,
                               pidx_ptr, 0, B, C, H * 2 * HALF, wait_ptr, target, err_ptr,
                               NORM=False, HAS_BIAS=False, GLU_=False, RESIDUAL=True,
                               ARGMAX=False, IEEE=IEEE, SPIN=SPIN, BLOCK_M=BLOCK_M, BLOCK_N=BN_O,
                               BLOCK_K=BK_O, FMA=FMA, K_P=HD_P)
                elif kind == K_GLU:
                    _gemv_task(tile, x_ptr, C, _ptr(layer_ptr, layer, F_POST, x_ptr), eps,
                               _ptr(layer_ptr, layer, F_GATE_UP, x_ptr), x_ptr, g_ptr, I, pmax_ptr,
                               pidx_ptr, 0, B, I, C, wait_ptr, target, err_ptr,
                               NORM=True, HAS_BIAS=False, GLU_=True, RESIDUAL=False,
                               ARGMAX=False, IEEE=IEEE, SPIN=SPIN, BLOCK_M=BLOCK_M, BLOCK_N=BN_GLU,
                               BLOCK_K=BK_GLU, FMA=FMA, K_P=C_P)
                elif kind == K_DOWN:
                    _gemv_task(tile, g_ptr, I, x_ptr, eps,
                               _ptr(layer_ptr, layer, F_DOWN, x_ptr), x_ptr, x_ptr, C, pmax_ptr,
                               pidx_ptr, 0, B, C, I, wait_ptr, target, err_ptr,
                               NORM=False, HAS_BIAS=False, GLU_=False, RESIDUAL=True,
                               ARGMAX=False, IEEE=IEEE, SPIN=SPIN, BLOCK_M=BLOCK_M, BLOCK_N=BN_DOWN,
                               BLOCK_K=BK_DOWN, FMA=FMA, K_P=I_P)
                elif kind == K_HEAD:
                    _gemv_task(tile, x_ptr, C, fnorm_ptr, eps_final, head_ptr, head_b_ptr, x_ptr, C,
                               pmax_ptr, pidx_ptr, n_head_tiles, B, V, C, wait_ptr, target, err_ptr,
                               NORM=True, HAS_BIAS=HEAD_BIAS, GLU_=False, RESIDUAL=False,
                               ARGMAX=True, IEEE=IEEE, SPIN=SPIN, BLOCK_M=BLOCK_M, BLOCK_N=BN_HEAD,
                               BLOCK_K=BK_HEAD, FMA=FMA, K_P=C_P)
                elif kind == K_EMBED:
                    _embed_task(tile, embed_ptr, token_ptr, x_ptr, C, C, wait_ptr, target, err_ptr,
                                BLOCK_C=BLOCK_C, SPIN=SPIN)
                elif kind == K_ADVANCE:
                    _advance_task(pmax_ptr, pidx_ptr, n_head_tiles, n_head_tiles, ids_ptr, s_ids,
                                  token_ptr, pos_ptr, fin_ptr, done_ptr, stops_ptr, eos_ptr,
                                  flag_ptr, B, E, eos_forced, wait_ptr, target, err_ptr, ctr_ptr,
                                  n_counters, BLOCK_B=BLOCK_B, CHUNK=CHUNK, BLOCK_E=BLOCK_E,
                                  BLOCK_CTR=BLOCK_CTR, SPIN=SPIN)
                if kind != K_ADVANCE:
                    _signal(ctr_ptr + phase + 1)
