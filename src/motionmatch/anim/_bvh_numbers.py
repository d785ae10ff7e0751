"""Bulk parser for the numeric MOTION block of a BVH file (numba).

One pass over the bytes: splits lines, parses decimal and scientific numbers, and checks
that every non-blank line holds exactly the expected number of values. Problems are
reported as an error code plus the (0-based) line index, which the caller turns into a
message naming the file and line.
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
            if exp10 == 0:
                v = m
            elif 0 < exp10 <= 22:
                v = m * pow10[exp10]
            elif -22 <= exp10 < 0:
                v = m / pow10[-exp10]
            else:
                v = m * 10.0 ** exp10
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
