"""Bulk parser for the numeric MOTION block of a BVH file (numba).

One pass over the bytes: splits lines, parses decimal and scientific numbers, and checks
that every non-blank line holds exactly the expected number of values. Problems are
reported as an error code plus the (0-based) line index, which the caller turns into a
message naming the file and line.

Numbers: up to 19 significant digits are kept. A value ``m * 10**e`` with an integer
``m < 2**53`` and ``|e| <= 22`` (what BVH exporters write, e.g. ``-12.345678``) is
converted with a single rounding, i.e. exactly as Python's ``float()``; others are within
2 ulp of it.

A second kernel, :func:`channels_to_local`, turns the channel values into local
quaternions and translations in one pass (no per-joint NumPy calls).
"""

from __future__ import annotations

import numba
import numpy as np

OK = 0
WRONG_COUNT = 1     # a frame line has too few or too many values (detail = count found)
NOT_A_NUMBER = 2    # a token is not a number (detail = byte offset of the token)
TOO_MANY_LINES = 3  # more frame lines than the header's Frames: value
NON_FINITE = 4      # nan / inf (detail = byte offset of the token)

_POW10 = np.array([10.0**i for i in range(23)])


@numba.njit(cache=True, nogil=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True, nogil=True)
def parse_frames(buf, n_frames, n_channels, out):
    """Parse ``buf`` (uint8) into ``out [n_frames, n_channels]``.

    Returns ``(code, line_index, frames_parsed, detail)``.
    """
    n = buf.shape[0]
    pow10 = _POW10
    i = 0
    line = 0
    frame = 0
    while i < n:
        # One line: from i to the next '\n'.
        col = 0
        blank = True
        while i < n and buf[i] != 10:
            c = buf[i]
            if _is_space(c):
                i += 1
                continue
            # A token starts here.
            start = i
            blank = False
            if frame >= n_frames:
                return TOO_MANY_LINES, line, frame, 0
            neg = False
            if c == 45 or c == 43:  # - +
                neg = c == 45
                i += 1
            mant = np.uint64(0)
            ndig = 0
            exp10 = 0
            any_digit = False
            while i < n and 48 <= buf[i] <= 57:
                any_digit = True
                if ndig < 19:
                    mant = mant * np.uint64(10) + np.uint64(buf[i] - 48)
                    if mant != 0:
                        ndig += 1
                else:
                    exp10 += 1
                i += 1
            if i < n and buf[i] == 46:  # .
                i += 1
                while i < n and 48 <= buf[i] <= 57:
                    any_digit = True
                    if ndig < 19:
                        mant = mant * np.uint64(10) + np.uint64(buf[i] - 48)
                        if mant != 0:
                            ndig += 1
                        exp10 -= 1
                    i += 1
            if not any_digit:
                # nan / inf spelled out, or garbage
                j = i
                while j < n and not _is_space(buf[j]) and buf[j] != 10:
                    j += 1
                word_len = j - i
                if word_len >= 3:
                    c0 = buf[i] | 32
                    c1 = buf[i + 1] | 32
                    c2 = buf[i + 2] | 32
                    if (c0 == 110 and c1 == 97 and c2 == 110) or (c0 == 105 and c1 == 110 and c2 == 102):
                        return NON_FINITE, line, frame, start
                return NOT_A_NUMBER, line, frame, start
            if i < n and (buf[i] == 101 or buf[i] == 69):  # e E
                i += 1
                eneg = False
                if i < n and (buf[i] == 45 or buf[i] == 43):
                    eneg = buf[i] == 45
                    i += 1
                if not (i < n and 48 <= buf[i] <= 57):
                    return NOT_A_NUMBER, line, frame, start
                e = 0
                while i < n and 48 <= buf[i] <= 57:
                    if e < 100000:
                        e = e * 10 + (buf[i] - 48)
                    i += 1
                exp10 += -e if eneg else e
            if i < n and not _is_space(buf[i]) and buf[i] != 10:
                return NOT_A_NUMBER, line, frame, start
            m = float(mant)
            if exp10 == 0 or mant == 0:
                v = m  # (0e400 is zero, not 0 * inf)
            elif 0 < exp10 <= 22:
                v = m * pow10[exp10]
            elif -22 <= exp10 < 0:
                v = m / pow10[-exp10]
            elif -44 <= exp10 < -22:
                v = (m / 1e22) / pow10[-exp10 - 22]
            elif 22 < exp10 <= 44:
                v = (m * pow10[exp10 - 22]) * 1e22
            elif exp10 < -308:
                v = (m * 1e-300) * 10.0 ** float(exp10 + 300)  # subnormal or zero
            else:
                v = m * 10.0 ** float(exp10)  # libm pow (an integer power would multiply repeatedly)
            if neg:
                v = -v
            if v != v or v == np.inf or v == -np.inf:
                return NON_FINITE, line, frame, start
            if col < n_channels:
                out[frame, col] = v
            col += 1
        if not blank:
            if col != n_channels:
                return WRONG_COUNT, line, frame, col
            frame += 1
        line += 1
        i += 1  # skip '\n'
    return OK, line, frame, 0


@numba.njit(cache=True, nogil=True)
def channels_to_local(values, rot_cols, rot_axes, pos_cols, scale, offsets, rotations, translations):
    """Channel values ``[F, C]`` (degrees, file units) to local transforms, in one pass.

    Args:
        values: ``[F, C]`` channel values as read from the file.
        rot_cols: ``[J, 3]`` column of each rotation channel in file order, ``-1`` after the last.
        rot_axes: ``[J, 3]`` axis (0 = x, 1 = y, 2 = z) of each of those channels.
        pos_cols: ``[J, 3]`` column of the X/Y/Z position channel, ``-1`` where there is none.
        scale: metres per file unit.
        offsets: ``[J, 3]`` rest offsets in metres (used where a position channel is absent).
        rotations: ``[F, J, 4]`` output, ``R = R_axis0 * R_axis1 * R_axis2`` as quaternions.
        translations: ``[F, J, 3]`` output, metres.
    """
    F = values.shape[0]
    J = offsets.shape[0]
    half_rad = np.pi / 360.0  # degrees -> half-angle radians
    for f in range(F):
        for j in range(J):
            w = 1.0
            x = 0.0
            y = 0.0
            z = 0.0
            for k in range(3):
                col = rot_cols[j, k]
                if col < 0:
                    break
                h = values[f, col] * half_rad
                c = np.cos(h)
                s = np.sin(h)
                a = rot_axes[j, k]
                # q <- q * (c, s * e_a)
                if a == 0:
                    w, x, y, z = w * c - x * s, w * s + x * c, y * c + z * s, z * c - y * s
                elif a == 1:
                    w, x, y, z = w * c - y * s, x * c - z * s, w * s + y * c, z * c + x * s
                else:
                    w, x, y, z = w * c - z * s, x * c + y * s, y * c - x * s, w * s + z * c
            rotations[f, j, 0] = w
            rotations[f, j, 1] = x
            rotations[f, j, 2] = y
            rotations[f, j, 3] = z
            for a in range(3):
                col = pos_cols[j, a]
                if col < 0:
                    translations[f, j, a] = offsets[j, a]
                else:
                    translations[f, j, a] = values[f, col] * scale
