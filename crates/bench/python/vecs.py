"""Reading texmex `.fvecs` / `.ivecs` files (little-endian int32 count, then that many values)."""

import numpy as np


def read_vecs(path, rows, dtype):
    """The first `rows` rows of `path` as a contiguous array of `dtype` ('<f4' or '<i4')."""
    raw = np.fromfile(path, dtype="<i4")
    dims = int(raw[0])
    table = raw.reshape(-1, dims + 1)[:rows]
    return np.ascontiguousarray(table[:, 1:]).view(dtype)
