"""The arithmetic of PyTorch's CPU random kernels, reproduced in numpy so that the same 32-bit
words give the same floats, bit for bit (nbgrad/random.py draws the words).

What torch 2.13 CPU (x86-64 wheels) does with the words of its mt19937, and so what this module
does (ATen: core/TransformationHelper.h, core/DistributionsHelper.h,
native/cpu/DistributionTemplates.h, native/cpu/avx_mathfun.h):

- a float32 (and float16 / bfloat16) uniform takes one word, ``(w & (2**24 - 1)) * 2**-24``; a
  float64 uniform takes two, ``((hi << 32 | lo) & (2**53 - 1)) * 2**-53``; ``x * (to - from) +
  from`` is one fused multiply-add in the type (the kernels are built with FMA, and GCC contracts).
- ``normal_`` on 16 elements or more of a contiguous tensor fills it with uniforms first, then
  turns each block of 16 into 8 Box-Muller pairs (``1 - u`` of the first 8 for the radius, the
  last 8 for the angle); a size not divisible by 16 draws 16 fresh uniforms for its last 16
  elements and recomputes them. float32 runs through torch's AVX2 kernel (``normal_stub`` is not
  dispatched to AVX-512): Cephes-style ``log256_ps`` / ``sincos256_ps`` polynomials in float32
  with the multiply-adds GCC fused, ported below op for op (``log256_ps``, ``sincos256_ps``);
  ``randn`` runs faster equivalents (``_log256_ps_fast``, ``_sincos256_ps_fast``: float64 sums
  rounded once for the fused multiply-adds, fewer array passes) that the tests check against the
  ports on every one of the 2**24 float32 uniforms. float64 uses glibc's ``log`` and
  ``cos`` / ``sin`` and ``std::fma`` for ``* std + mean``.
- fewer than 16 elements (or a non-contiguous tensor) take the scalar path: a pair of float64
  uniforms gives ``r * cos`` and ``r * sin`` (``r = sqrt(-2 log1p(-u2))``), and the ``sin`` half
  is cached in the generator for the next scalar draw, whatever the dtype.

Where this differs on other machines: an aarch64 or POWER wheel, or a CPU without AVX2, runs the
scalar ``NormalFill16<float>`` (glibc ``logf`` / ``cosf`` / ``sinf``) instead of the AVX2 port
below, so torch's own large float32 ``randn`` differs there in the last bits; glibc's ``log`` /
``log1p`` / ``exp`` / ``tan`` are what Python's ``math`` module calls here (the same library
torch calls), so another libm means other last bits on both sides.
"""
from __future__ import annotations

import math

import numpy as np

_F = np.float32

# ---- uniforms -----------------------------------------------------------------------------------


def u24(words):
    """float32 uniforms in [0, 1) from 32-bit words (torch's uniform_real for float): uint32, or
    the uint64 array the bit generator returns them in (its low 24 bits kept in place)."""
    if words.dtype == np.uint64:
        words &= np.uint64(0xFFFFFF)
    else:
        words = words & 0xFFFFFF
    out = words.astype(np.float32)
    out *= _F(2.0 ** -24)
    return out


def u53(words64):
    """float64 uniforms in [0, 1) from uint64 words (torch's uniform_real for double)."""
    return (words64 & np.uint64(2 ** 53 - 1)).astype(np.float64) * 2.0 ** -53


# ---- fused multiply-add, correctly rounded ---------------------------------------------


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd(s, err):
    """s = RN(x) and err = x - s exactly: x rounded to odd (the neighbour with an odd last bit
    when x is not representable), so that a later rounding to fewer bits is correct."""
    fix = (err != 0) & ((s.view(np.int64) & 1) == 0)
    if fix.any():
        s = s.copy()
        s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
    return s


def fma32(a, b, c):
    """``a * b + c`` rounded once to float32 (float32 values: arrays, or numbers for b and c).

    The product of two float32 is exact in float64, and so is their sum with a float32 unless
    the terms lie far apart; only a float64 sum that lands on a float32 halfway point can then
    round twice wrongly, and those few elements are redone exactly (rounded to odd). Six array
    operations in the common case: this sits in the inner loop of the float32 ``randn``."""
    a = np.asarray(a, np.float32)
    b = np.float32(b) if np.ndim(b) == 0 else np.asarray(b, np.float32)
    c = np.float32(c) if np.ndim(c) == 0 else np.asarray(c, np.float32)
    if b.ndim == 0 and c.ndim == 0:
        if c == 0:
            return a * b
        if b == 1:
            return a + c
    return _fma32(a, b, c)


def _fma32(a, b, c):
    """fma32 for a float32 array a, and b, c float32 arrays or numpy float32 scalars (no
    checks: the polynomials below call it directly)."""
    s = a.astype(np.float64)
    s *= b
    s += c
    out = s.astype(np.float32)
    low = s.view(np.int64)
    low &= 0x1FFFFFFF  # s is not needed any more: its bits below float32's precision
    half = low == 0x10000000
    if half.any():
        idx = np.flatnonzero(half)
        p = np.broadcast_to(a, out.shape).ravel()[idx].astype(np.float64)
        p *= np.broadcast_to(b, out.shape).ravel()[idx]
        cc = np.broadcast_to(c, out.shape).ravel()[idx].astype(np.float64)
        out.ravel()[idx] = _round_to_odd(*_two_sum(p, cc)).astype(np.float32)
    return out


def _fma32_unchecked(a, b, c):
    """``a * b + c`` summed once in float64 and rounded to float32: the fused result unless the
    float64 sum was inexact and fell on a float32 halfway point. Only for the Box-Muller
    polynomials below on their actual inputs (the 2**24 float32 uniforms), where
    tests/test_random_streams.py checks every input against the checked ``_fma32``."""
    s = np.multiply(a, b, dtype=np.float64)
    s += c
    return s.astype(np.float32)


_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitter for float64


def _two_prod(a, b):
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    ah = ca - (ca - a)
    bh = cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma64(a, b, c):
    """``a * b + c`` rounded once in float64 (std::fma), by Boldo and Melquiond's emulation:
    exact product and sum, the low parts added with rounding to odd."""
    a = np.asarray(a, np.float64)
    if np.ndim(b) == 0 and np.ndim(c) == 0:
        if float(c) == 0.0:
            return a * float(b)
        if float(b) == 1.0:
            return a + float(c)
    b = np.broadcast_to(np.asarray(b, np.float64), a.shape)
    c = np.broadcast_to(np.asarray(c, np.float64), a.shape)
    uh, ul = _two_prod(a, b)
    th, tl = _two_sum(c, uh)
    v, verr = _two_sum(tl, ul)
    return th + _round_to_odd(v, verr)


# ---- glibc's functions, element by element (the library torch's scalar code calls) --------------


def libm(fn, x):
    """``fn`` (a ``math`` function, i.e. glibc's) of each element of the float64 array x."""
    x = np.asarray(x, np.float64)
    return np.fromiter(map(fn, x.ravel().tolist()), np.float64, x.size).reshape(x.shape)


# ---- torch's AVX2 Box-Muller for float32 (avx_mathfun.h, with GCC's fused multiply-adds) -------
_LOG_P = [_F(v) for v in (7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1,
                          1.4249322787E-1, -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1,
                          3.3333331174E-1)]
_LOG_Q1, _LOG_Q2 = _F(-2.12194440e-4), _F(0.693359375)
_SQRTHF = _F(0.707106781186547524)
_MIN_NORM = np.array([0x00800000], np.int32).view(np.float32)[0]
_DP = [_F(-0.78515625), _F(-2.4187564849853515625e-4), _F(-3.77489497744594108e-8)]
_SIN_P = [_F(-1.9515295891E-4), _F(8.3321608736E-3), _F(-1.6666654611E-1)]
_COS_P = [_F(2.443315711809948E-005), _F(-1.388731625493765E-003), _F(4.166664568298827E-002)]
_FOPI = _F(1.27323954473516)
_ONE, _HALF = _F(1), _F(0.5)


def log256_ps(x):
    """avx_mathfun's log256_ps for positive float32 x."""
    x = np.maximum(x, _MIN_NORM)
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7f).astype(np.float32) + _ONE
    x = ((bits & ~0x7f800000) | 0x3f000000).view(np.float32)  # mantissa in [0.5, 1)
    small = x < _SQRTHF
    e = e - small.astype(np.float32)
    x = (x - _ONE) + x * small  # x + x - 1 where small, else x - 1
    z = x * x
    y = _fma32(x, _LOG_P[0], _LOG_P[1])
    for p in _LOG_P[2:]:
        y = _fma32(y, x, p)
    y = _fma32(y * x, z, e * _LOG_Q1)
    y = y - z * _HALF
    return (x + y) + e * _LOG_Q2  # e * Q2 is exact (8 + 9 bits): the fused add is a plain one


def _log256_ps_fast(x):
    """log256_ps(x) for the float32 Box-Muller's inputs ``1 - u``: the same operations with
    fewer array passes (integer exponent, in-place updates, the Horner steps as float64 sums
    rounded to float32 without the halfway check). tests/test_random_streams.py checks it
    against log256_ps on all 2**24 such inputs, bit for bit."""
    bits = np.maximum(x, _MIN_NORM).view(np.int32)
    t = bits >> 23
    m = bits & ~0x7f800000
    m |= 0x3f000000
    m = m.view(np.float32)  # mantissa in [0.5, 1)
    small = m < _SQRTHF
    t -= small
    e = t.astype(np.float32)
    e -= _F(126)  # the exponent + 1 - small, exactly
    x = m - _ONE
    np.add(x, m, out=x, where=small)  # x + x - 1 where small: exact, as the kernel's sum
    z = x * x
    x64 = x.astype(np.float64)
    s = x64 * float(_LOG_P[0])
    s += float(_LOG_P[1])
    y = s.astype(np.float32)
    for p in _LOG_P[2:]:
        s = y.astype(np.float64)
        s *= x64
        s += float(p)
        y = s.astype(np.float32)
    y *= x
    y = _fma32_unchecked(y, z, e * _LOG_Q1)
    z *= _HALF
    y -= z
    y += x
    e *= _LOG_Q2
    y += e
    return y


def sincos256_ps(x):
    """avx_mathfun's sincos256_ps for float32 x: (sin, cos)."""
    sign_sin = x.view(np.int32) & np.int32(-0x80000000)
    x = np.abs(x)
    j = (x * _FOPI).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(np.float32)
    sign_sin = sign_sin ^ ((j & 4) << 29)
    sign_cos = (~(j - 2) & 4) << 29
    poly = (j & 2) == 0
    # y is an even integer below 2**4 here, and DP1, DP2 have 8 and 12 bits: their products are
    # exact, so only the last of the three fused multiply-adds needs emulating
    x = (x + y * _DP[0]) + y * _DP[1]
    x = _fma32(y, _DP[2], x)
    z = x * x
    yc = _fma32(_fma32(z, _COS_P[0], _COS_P[1]), z, _COS_P[2])
    yc = _fma32(yc * z, z, -(z * _HALF)) + _ONE
    ys = _fma32(_fma32(z, _SIN_P[0], _SIN_P[1]), z, _SIN_P[2])
    ys = _fma32(ys * z, x, x)
    # the kernel's selection by bit masks: sin = (cos poly & ~mask) + (sin poly & mask), and
    # cos = the other two, each zeroed half an exact +0
    mask = -(poly.astype(np.int32))
    sin2 = (ys.view(np.int32) & mask).view(np.float32)
    sin1 = (yc.view(np.int32) & ~mask).view(np.float32)
    s, c = sin1 + sin2, (yc - sin1) + (ys - sin2)
    return ((s.view(np.int32) ^ sign_sin).view(np.float32),
            (c.view(np.int32) ^ sign_cos).view(np.float32))


def _poly32(z64, z, c0, c1, c2):
    """``fma(fma(z, c0, c1), z, c2)`` in float32, each fused step a float64 sum rounded once
    (z64: z as float64)."""
    s = z64 * float(c0)
    s += float(c1)
    s = s.astype(np.float32).astype(np.float64)
    s *= z64
    s += float(c2)
    return s.astype(np.float32)


def _sincos256_ps_fast(x):
    """sincos256_ps(x) for the Box-Muller angles ``float32(2 pi) * u`` (x >= 0): the same
    operations with fewer array passes (the multiply-adds as float64 sums rounded once, the
    bit-mask selection as np.where). tests/test_random_streams.py checks it against
    sincos256_ps on all 2**24 angles, bit for bit."""
    j = (x * _FOPI).astype(np.int32)
    j += 1
    j &= ~1
    y = j.astype(np.float32)
    sign_sin = j & 4
    sign_sin <<= 29
    sign_cos = j - 2
    np.invert(sign_cos, out=sign_cos)
    sign_cos &= 4
    sign_cos <<= 29
    poly = (j & 2) == 0
    t = y * _DP[0]
    t += x
    t += y * _DP[1]
    x = _fma32_unchecked(y, _DP[2], t)
    z = x * x
    z64 = z.astype(np.float64)
    yc = _poly32(z64, z, *_COS_P)
    yc *= z
    s = yc.astype(np.float64)
    s *= z64
    s -= z * _HALF
    yc = s.astype(np.float32)
    yc += _ONE
    ys = _poly32(z64, z, *_SIN_P)
    ys *= z
    ys = _fma32_unchecked(ys, x, x)
    sin, cos = np.where(poly, ys, yc), np.where(poly, yc, ys)
    sin.view(np.int32)[...] ^= sign_sin
    cos.view(np.int32)[...] ^= sign_cos
    return sin, cos


_TWO_PI_F = _F(2.0 * math.pi)


_CHUNK = 2048  # blocks of 16 per pass: the float64 temporaries stay in the CPU's cache


def _box_muller16_f32(u, mean, std, out):
    """torch's NormalFill16<float> (AVX2) on blocks (k, 16) of float32 uniforms, _CHUNK
    blocks at a time, into ``out`` (k, 16)."""
    plain = std == 1 and mean == 0  # (then * std + mean changes nothing: skip the passes)
    for i in range(0, len(u), _CHUNK):
        b = u[i:i + _CHUNK]
        radius = _ONE - b[:, :8]
        radius = _log256_ps_fast(radius)
        radius *= _F(-2)
        np.sqrt(radius, out=radius)
        s, c = _sincos256_ps_fast(_TWO_PI_F * b[:, 8:])
        c *= radius
        s *= radius
        o = out[i:i + _CHUNK]
        o[:, :8] = c if plain else fma32(c, std, mean)
        o[:, 8:] = s if plain else fma32(s, std, mean)
    return out


def _box_muller16_f64(u, mean, std, out):
    """torch's NormalFill16<double> on blocks (k, 16) of float64 uniforms, into ``out``: glibc's
    log; numpy's cos / sin agree with glibc's on [0, 2 pi) (tests/test_random_streams.py checks
    10**6)."""
    radius = np.sqrt(-2.0 * libm(math.log, 1.0 - u[:, :8]))
    theta = (2.0 * math.pi) * u[:, 8:]
    out[:, :8] = fma64(radius * np.cos(theta), std, mean)
    out[:, 8:] = fma64(radius * np.sin(theta), std, mean)
    return out


def normal_fill(u, tail, mean, std):
    """torch's ``normal_fill``: ``u`` the n >= 16 uniforms filling the tensor (float32 or
    float64), ``tail`` the 16 more drawn when n % 16 (else None). Returns the n normals."""
    n = u.size
    f32 = u.dtype == np.float32
    box = _box_muller16_f32 if f32 else _box_muller16_f64
    mean, std = (_F(mean), _F(std)) if f32 else (float(mean), float(std))
    m = n - n % 16
    out = np.empty(n, u.dtype)
    box(u[:m].reshape(-1, 16), mean, std, out[:m].reshape(-1, 16))
    if tail is not None:
        box(tail.reshape(1, 16), mean, std, out[n - 16:].reshape(1, 16))
    return out


def box_muller_pairs(u):
    """The scalar path's pairs: float64 uniforms (u1, u2, u1, u2, ...) -> (cos half, sin half)
    of ``normal_distribution<double>``, glibc's log1p / cos / sin."""
    u1, u2 = u[0::2], u[1::2]
    r = np.sqrt(-2.0 * libm(math.log1p, -u2))
    theta = 2.0 * math.pi * u1
    return r * libm(math.cos, theta), r * libm(math.sin, theta)
