"""Small numba intrinsics that emit LLVM vector code for the box search's inner loops.

LLVM does not vectorise the short fixed-width loops of the box search by itself (the
accumulators would alias the data as far as it can tell, and the loops are fully unrolled
before the vectoriser runs), so these intrinsics write the ``<W x float>`` operations
directly. They use plain IEEE operations (no fast-math flags, no fused multiply-add); only
the order of the additions differs from a scalar loop (within the same rounding bound).

All offsets are in elements of the arrays passed in (C-contiguous; float16 values are
passed as the uint16 array of their bits, numba having no float16); the caller guarantees
they are in bounds.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["box_lb4h", "box_lb4hw", "codes_gap", "prefetch", "rowdist16", "rowdist16w", "top_block16q", "top_block16qw"]

#: Codes the coded boxes of :func:`top_block16q` are widened by (covers the float32 rounding
#: of the query in grid units, at most ~1.5e-5 code for codes up to 255).
GRID_MARGIN = 2.0**-12

_F32 = ir.FloatType()
_I64 = ir.IntType(64)


def _splat(builder, value, width):
    vty = ir.VectorType(_F32, width)
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))


def _vmax(builder, a, b):
    return builder.select(builder.fcmp_ordered(">", a, b), a, b)


def _hmin(builder, v, width):
    """Smallest lane of ``v``."""
    m = builder.extract_element(v, ir.Constant(ir.IntType(32), 0))
    for j in range(1, width):
        x = builder.extract_element(v, ir.Constant(ir.IntType(32), j))
        m = builder.select(builder.fcmp_ordered("<", x, m), x, m)
    return m


def _vptr(builder, ptr, width):
    return builder.bitcast(ptr, ir.VectorType(_F32, width).as_pointer())


def _f32_array(t):
    return isinstance(t, types.Array) and t.dtype == types.float32 and t.layout == "C"


@intrinsic
def prefetch(typingctx, arr, off):
    """Hint the processor to fetch the cache line holding ``arr.flat[off]`` (no effect on results)."""
    if not (isinstance(arr, types.Array) and arr.layout == "C"):
        return None
    sig = types.void(arr, types.intp)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _u16_array(t):
    return isinstance(t, types.Array) and t.dtype == types.uint16 and t.layout == "C"


def _load_half(builder, base_ptr, index, width):
    """``width`` float16 values (stored as uint16) at ``base_ptr[index]``, widened to float32."""
    hty = ir.VectorType(ir.HalfType(), width)
    p = builder.bitcast(builder.gep(base_ptr, [index]), hty.as_pointer())
    return builder.fpext(builder.load(p, align=2), ir.VectorType(_F32, width))


def _box_lb4h_codegen(weighted: bool):
    """Code of :func:`box_lb4h` (``weighted``: of :func:`box_lb4hw`, one more array argument)."""
    a_acc = 6 if weighted else 5
    a_d0 = 4 if weighted else 3

    def codegen(context, builder, signature, args):
        w = 4
        b_arr = context.make_array(signature.args[0])(context, builder, args[0])
        q_arr = context.make_array(signature.args[2])(context, builder, args[2])
        a_arr = context.make_array(signature.args[a_acc])(context, builder, args[a_acc])
        s_arr = context.make_array(signature.args[3])(context, builder, args[3]) if weighted else None
        off, d0, d1 = args[1], args[a_d0], args[a_d0 + 1]
        acc_ptr = _vptr(builder, a_arr.data, w)
        slot = cgutils.alloca_once(builder, ir.VectorType(_F32, w))
        builder.store(builder.load(acc_ptr, align=4), slot)
        zero = ir.Constant(ir.VectorType(_F32, w), [0.0] * w)
        count = builder.sub(d1, d0)
        with cgutils.for_range(builder, count) as loop:
            d = builder.add(d0, loop.index)
            qv = _splat(builder, builder.load(builder.gep(q_arr.data, [d])), w)
            base = builder.add(off, builder.mul(d, ir.Constant(_I64, 2 * w)))
            lo = _load_half(builder, b_arr.data, base, w)
            hi = _load_half(builder, b_arr.data, builder.add(base, ir.Constant(_I64, w)), w)
            m = _vmax(builder, _vmax(builder, builder.fsub(lo, qv), builder.fsub(qv, hi)), zero)
            if weighted:
                sv = _splat(builder, builder.load(builder.gep(s_arr.data, [d])), w)
                # an empty leaf's gap is +inf: inf * 0 is NaN, which the max turns into 0
                m = _vmax(builder, builder.fmul(m, sv), zero)
            builder.store(builder.fadd(builder.load(slot), builder.fmul(m, m)), slot)
        res = builder.load(slot)
        builder.store(res, acc_ptr, align=4)
        return _hmin(builder, res, w)

    return codegen


@intrinsic
def box_lb4h(typingctx, bounds, off, qp, d0, d1, acc):
    """Lower bounds of 4 boxes with float16 bounds (``bounds``: uint16 array of their bits):
    ``acc[c] += Σ_{d0 <= d < d1} max(lo - qp[d], qp[d] - hi, 0)²`` with
    ``lo = bounds[off + 8 d + c]``, ``hi = bounds[off + 8 d + 4 + c]`` for ``c < 4``; returns
    ``min_c acc[c]`` after the update (float32)."""
    if not (_u16_array(bounds) and _f32_array(qp) and _f32_array(acc)):
        return None
    sig = types.float32(bounds, types.intp, qp, types.intp, types.intp, acc)
    return sig, _box_lb4h_codegen(False)


@intrinsic
def box_lb4hw(typingctx, bounds, off, qp, sw, d0, d1, acc):
    """:func:`box_lb4h` with per-dimension scales ``sw [D]`` float32 (the square roots of the
    weights): ``acc[c] += Σ_d (sw[d] max(lo - qp[d], qp[d] - hi, 0))²``, a term being 0 where
    ``sw[d] = 0`` (also for the infinite gaps of empty boxes)."""
    if not (_u16_array(bounds) and _f32_array(qp) and _f32_array(sw) and _f32_array(acc)):
        return None
    sig = types.float32(bounds, types.intp, qp, sw, types.intp, types.intp, acc)
    return sig, _box_lb4h_codegen(True)


def _u8_array(t):
    return isinstance(t, types.Array) and t.dtype == types.uint8 and t.layout == "C"


def _load_u8(builder, base_ptr, index, width):
    """``width`` uint8 codes at ``base_ptr[index]``, as float32."""
    bty = ir.VectorType(ir.IntType(8), width)
    p = builder.bitcast(builder.gep(base_ptr, [index]), bty.as_pointer())
    return builder.uitofp(builder.load(p, align=1), ir.VectorType(_F32, width))


def _top_block16q_codegen(weighted: bool):
    """Code of :func:`top_block16q` (``weighted``: of :func:`top_block16qw`, ``sw`` after ``step``)."""
    a_pen = 5 if weighted else 4

    def codegen(context, builder, signature, args):
        width = 16
        vty = ir.VectorType(_F32, width)
        t_arr = context.make_array(signature.args[0])(context, builder, args[0])
        q_arr = context.make_array(signature.args[2])(context, builder, args[2])
        w_arr = context.make_array(signature.args[3])(context, builder, args[3])
        s_arr = context.make_array(signature.args[4])(context, builder, args[4]) if weighted else None
        p_arr = context.make_array(signature.args[a_pen])(context, builder, args[a_pen])
        lb_arr = context.make_array(signature.args[a_pen + 1])(context, builder, args[a_pen + 1])
        rd_arr = context.make_array(signature.args[a_pen + 2])(context, builder, args[a_pen + 2])
        off, t0 = args[1], args[a_pen + 3]
        dim = builder.extract_value(q_arr.shape, 0)
        s_lb = cgutils.alloca_once(builder, vty)
        s_rd = cgutils.alloca_once(builder, vty)
        zero = ir.Constant(vty, [0.0] * width)
        eps = ir.Constant(vty, [GRID_MARGIN] * width)
        builder.store(zero, s_lb)
        builder.store(zero, s_rd)
        with cgutils.for_range(builder, dim) as loop:
            d = loop.index
            qv = _splat(builder, builder.load(builder.gep(q_arr.data, [d])), width)
            wv = _splat(builder, builder.load(builder.gep(w_arr.data, [d])), width)
            base = builder.add(off, builder.mul(d, ir.Constant(_I64, 3 * width)))
            lo = _load_u8(builder, t_arr.data, base, width)
            hi = _load_u8(builder, t_arr.data, builder.add(base, ir.Constant(_I64, width)), width)
            rep = _load_u8(builder, t_arr.data, builder.add(base, ir.Constant(_I64, 2 * width)), width)
            below = builder.fsub(lo, builder.fadd(qv, eps))
            above = builder.fsub(builder.fsub(qv, eps), hi)
            m = builder.fmul(_vmax(builder, _vmax(builder, below, above), zero), wv)
            x = builder.fmul(builder.fsub(rep, qv), wv)
            if weighted:  # (gap * step) * sw: the value-unit gap first, then its scale
                sv = _splat(builder, builder.load(builder.gep(s_arr.data, [d])), width)
                m = builder.fmul(m, sv)
                x = builder.fmul(x, sv)
            builder.store(builder.fadd(builder.load(s_lb), builder.fmul(m, m)), s_lb)
            builder.store(builder.fadd(builder.load(s_rd), builder.fmul(x, x)), s_rd)
        pen_v = builder.load(_vptr(builder, builder.gep(p_arr.data, [t0]), width), align=4)
        builder.store(builder.fadd(builder.load(s_lb), pen_v), _vptr(builder, builder.gep(lb_arr.data, [t0]), width),
                      align=4)
        builder.store(builder.load(s_rd), _vptr(builder, builder.gep(rd_arr.data, [t0]), width), align=4)
        return context.get_dummy_value()

    return codegen


@intrinsic
def top_block16q(typingctx, tops, off, qc, step, pen, lb, rd, t0):
    """Lower bounds and representative distances of 16 top boxes ``t0 .. t0+15``, with the
    bounds quantised to uint8 codes on a per-dimension grid.

    ``tops`` holds, from ``off``, for each dimension ``d``: the 16 low codes, the 16 high
    codes and the 16 representative codes. ``qc [D]`` is the query in code units and
    ``step [D]`` the grid steps. Writes ``lb[t] = pen[t] + Σ_d (step[d] m)²`` with
    ``m = max(lo - (qc[d] + GRID_MARGIN), (qc[d] - GRID_MARGIN) - hi, 0)`` (the coded box widened
    by a small margin that covers the rounding of ``qc``), and
    ``rd[t] = Σ_d (step[d] (rep - qc[d]))²`` (scaling before squaring cannot overflow).
    """
    if not (_u8_array(tops) and _f32_array(qc) and _f32_array(step) and _f32_array(pen) and _f32_array(lb)
            and _f32_array(rd)):
        return None
    sig = types.void(tops, types.intp, qc, step, pen, lb, rd, types.intp)
    return sig, _top_block16q_codegen(False)


@intrinsic
def top_block16qw(typingctx, tops, off, qc, step, sw, pen, lb, rd, t0):
    """:func:`top_block16q` with per-dimension scales ``sw [D]`` float32 (the square roots of
    the weights): ``lb[t] = pen[t] + Σ_d ((step[d] m) sw[d])²`` and
    ``rd[t] = Σ_d ((step[d] (rep - qc[d])) sw[d])²``."""
    if not (_u8_array(tops) and _f32_array(qc) and _f32_array(step) and _f32_array(sw) and _f32_array(pen)
            and _f32_array(lb) and _f32_array(rd)):
        return None
    sig = types.void(tops, types.intp, qc, step, sw, pen, lb, rd, types.intp)
    return sig, _top_block16q_codegen(True)


def _hsum(builder, v, width):
    """Sum of the lanes of ``v`` (pairwise tree)."""
    i32 = ir.IntType(32)
    while width > 1:
        half = width // 2
        lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, half), list(range(half))))
        hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, half), list(range(half, width))))
        v = builder.fadd(lo, hi)
        width = half
    return builder.extract_element(v, ir.Constant(i32, 0))


def _masked_load(builder, ptr, mask, width):
    """``width`` float32 at ``ptr``, lanes outside ``mask`` read as 0 (and not touched)."""
    vty = ir.VectorType(_F32, width)
    mty = ir.VectorType(ir.IntType(1), width)
    fnty = ir.FunctionType(vty, [ir.IntType(8).as_pointer(), ir.IntType(32), mty, vty])
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"llvm.masked.load.v{width}f32.p0")
    p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
    return builder.call(fn, [p, ir.Constant(ir.IntType(32), 4), mask, ir.Constant(vty, [0.0] * width)])


def _rowdist16_codegen(weighted: bool):
    """Code of :func:`rowdist16` (``weighted``: of :func:`rowdist16w`, scales before ``acc``)."""
    a_acc = 5 if weighted else 4

    def codegen(context, builder, signature, args):
        w = 16
        f_arr = context.make_array(signature.args[0])(context, builder, args[0])
        q_arr = context.make_array(signature.args[3])(context, builder, args[3])
        a_arr = context.make_array(signature.args[a_acc])(context, builder, args[a_acc])
        s_arr = context.make_array(signature.args[4])(context, builder, args[4]) if weighted else None
        row0, nrows = args[1], args[2]
        dim = builder.extract_value(f_arr.shape, 1)
        n_chunks = builder.udiv(builder.add(dim, ir.Constant(_I64, w - 1)), ir.Constant(_I64, w))
        lane = ir.Constant(ir.VectorType(_I64, w), list(range(w)))
        inf = ir.Constant(_F32, float("inf"))
        best = cgutils.alloca_once(builder, _F32)
        builder.store(inf, best)
        with cgutils.for_range(builder, ir.Constant(_I64, w)) as frame:
            j = frame.index
            out_ptr = builder.gep(a_arr.data, [j])
            with builder.if_else(builder.icmp_signed("<", j, nrows)) as (inside, outside):
                with inside:
                    row_ptr = builder.gep(f_arr.data, [builder.mul(builder.add(row0, j), dim)])
                    s = cgutils.alloca_once(builder, ir.VectorType(_F32, w))
                    builder.store(ir.Constant(ir.VectorType(_F32, w), [0.0] * w), s)
                    with cgutils.for_range(builder, n_chunks) as chunk:
                        d0 = builder.mul(chunk.index, ir.Constant(_I64, w))
                        left = builder.sub(dim, d0)
                        mask = builder.icmp_signed("<", lane, _splat_i64(builder, left, w))
                        x = _masked_load(builder, builder.gep(row_ptr, [d0]), mask, w)
                        qv = _masked_load(builder, builder.gep(q_arr.data, [d0]), mask, w)
                        t = builder.fsub(x, qv)
                        if weighted:
                            t = builder.fmul(t, _masked_load(builder, builder.gep(s_arr.data, [d0]), mask, w))
                        builder.store(builder.fadd(builder.load(s), builder.fmul(t, t)), s)
                    total = _hsum(builder, builder.load(s), w)
                    builder.store(total, out_ptr)
                    cur = builder.load(best)
                    builder.store(builder.select(builder.fcmp_ordered("<", total, cur), total, cur), best)
                with outside:
                    builder.store(inf, out_ptr)
        return builder.load(best)

    return codegen


def _rows_array(t):
    return isinstance(t, types.Array) and t.ndim == 2 and t.dtype == types.float32 and t.layout == "C"


@intrinsic
def rowdist16(typingctx, feats, row0, nrows, q, acc):
    """``acc[j] = Σ_d (feats[row0 + j, d] - q[d])²`` for ``j < nrows`` (``nrows <= 16``) and
    ``acc[j] = +inf`` for ``nrows <= j < 16``: squared float32 distances of up to 16
    consecutive rows of the row-major ``feats [F, D]``, 16 dimensions at a time (masked loads
    for the last, partial chunk: nothing past a row's end is read). Returns ``min_j acc[j]``."""
    if not (_rows_array(feats) and _f32_array(q) and _f32_array(acc)):
        return None
    sig = types.float32(feats, types.intp, types.intp, q, acc)
    return sig, _rowdist16_codegen(False)


@intrinsic
def rowdist16w(typingctx, feats, row0, nrows, q, sw, acc):
    """:func:`rowdist16` with per-dimension scales ``sw [D]`` float32 (the square roots of the
    weights): ``acc[j] = Σ_d (sw[d] (feats[row0 + j, d] - q[d]))²``."""
    if not (_rows_array(feats) and _f32_array(q) and _f32_array(sw) and _f32_array(acc)):
        return None
    sig = types.float32(feats, types.intp, types.intp, q, sw, acc)
    return sig, _rowdist16_codegen(True)


def _splat_i64(builder, value, width):
    vty = ir.VectorType(_I64, width)
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))


def _codes_gap_terms(builder, lo_ptr, hi_ptr, ql, qh, wc, d0, width):
    """``wc * max(lo - qh, ql - hi, 0)^2`` of ``width`` coded columns from ``d0``."""
    vty = ir.VectorType(_F32, width)
    zero = ir.Constant(vty, [0.0] * width)
    lo = _load_u8(builder, lo_ptr, d0, width)
    hi = _load_u8(builder, hi_ptr, d0, width)
    g1 = builder.fsub(lo, builder.load(_vptr(builder, builder.gep(qh, [d0]), width), align=4))
    g2 = builder.fsub(builder.load(_vptr(builder, builder.gep(ql, [d0]), width), align=4), hi)
    g = _vmax(builder, _vmax(builder, g1, g2), zero)
    return builder.fmul(builder.load(_vptr(builder, builder.gep(wc, [d0]), width), align=4), builder.fmul(g, g))


@intrinsic
def codes_gap(typingctx, lo, hi, b, ql, qh, wc):
    """``Σ_d wc[d] max(lo[b, d] - qh[d], ql[d] - hi[b, d], 0)²`` over the ``Dp`` coded columns
    of the uint8 box codes ``lo, hi [B, Dp]`` (``Dp`` a multiple of 8; ``ql, qh, wc [>= Dp]``
    float32): the lower bound of
    :func:`motionmatch.search._penalized_kernels.box_codes_gap`, 16 columns at a time
    (AVX-512 lanes; the last 8 columns, if any, in an 8-lane step), summed pairwise. Plain
    IEEE operations: only the order of the additions differs from a scalar loop."""
    if not (_u8_array(lo) and _u8_array(hi) and _f32_array(ql) and _f32_array(qh) and _f32_array(wc)):
        return None
    sig = types.float32(lo, hi, types.intp, ql, qh, wc)

    def codegen(context, builder, signature, args):
        L = context.make_array(signature.args[0])(context, builder, args[0])
        H = context.make_array(signature.args[1])(context, builder, args[1])
        ql_, qh_, wc_ = (context.make_array(signature.args[i])(context, builder, args[i]).data for i in (3, 4, 5))
        dim = builder.extract_value(L.shape, 1)
        off = builder.mul(args[2], dim)
        lo_ptr = builder.gep(L.data, [off])
        hi_ptr = builder.gep(H.data, [off])
        acc = cgutils.alloca_once_value(builder, ir.Constant(ir.VectorType(_F32, 16), [0.0] * 16))
        n16 = builder.udiv(dim, ir.Constant(_I64, 16))
        with cgutils.for_range(builder, n16) as loop:
            t = _codes_gap_terms(builder, lo_ptr, hi_ptr, ql_, qh_, wc_, builder.mul(loop.index, ir.Constant(_I64, 16)), 16)
            builder.store(builder.fadd(builder.load(acc), t), acc)
        total = cgutils.alloca_once_value(builder, _hsum(builder, builder.load(acc), 16))
        d8 = builder.mul(n16, ir.Constant(_I64, 16))
        with builder.if_then(builder.icmp_signed("<", d8, dim)):
            t8 = _hsum(builder, _codes_gap_terms(builder, lo_ptr, hi_ptr, ql_, qh_, wc_, d8, 8), 8)
            builder.store(builder.fadd(builder.load(total), t8), total)
        return builder.load(total)

    return sig, codegen
