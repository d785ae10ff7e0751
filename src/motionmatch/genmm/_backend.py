"""Where the synthesis arrays live: numpy on the CPU, or PyTorch (CPU or CUDA) when installed.

The synthesis core (:mod:`motionmatch.genmm._core`) is written once, against the Python
array API standard: it only calls functions of a namespace ``xp`` (``xp.matmul``,
``xp.min``, ``xp.argmin``, ``xp.take``, slicing, ...). NumPy >= 2 *is* such a namespace;
for PyTorch tensors the namespace comes from ``array-api-compat`` (both are in the
``motionmatch[gpu]`` extra). Nothing here imports torch unless a torch device is asked for,
so the CPU path needs neither package.

On the CPU, numpy's backend does not run the core's row-wise steps through numpy but
through compiled kernels on several threads (:mod:`motionmatch.genmm._cpu`), the same
operations in the same order. PyTorch's CPU backend ran the array-API code 1.2-2x slower than numpy
(0.109 s vs 0.095 s salsa, 0.019 vs 0.014 s elephant, one thread) and is a 700 MB
dependency, so numpy stays the CPU path and torch is only for CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from motionmatch.errors import MotionMatchError


class _NumPy1:
    """The array-API names the synthesis core uses, for NumPy 1.x (which Blender's bundled Python
    and its ``bpy`` module still pin): ``concat``, ``astype``, ``matrix_transpose``, and
    creation functions that accept (and ignore) ``device=``. Everything else is numpy's."""

    _CREATE = ("empty", "zeros", "ones", "full", "asarray", "arange", "empty_like", "zeros_like", "full_like")

    def __getattr__(self, name: str) -> Any:
        fn = getattr(np, name)
        if name in self._CREATE:
            return lambda *a, device=None, **kw: fn(*a, **kw)
        return fn

    concat = staticmethod(np.concatenate)

    @staticmethod
    def astype(x, dtype, /, *, copy: bool = True, device=None):
        return x.astype(dtype, copy=copy)

    @staticmethod
    def matrix_transpose(x):
        return np.swapaxes(x, -1, -2)


_NUMPY = np if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else _NumPy1()


class BackendError(MotionMatchError, RuntimeError):
    """The requested device cannot be used (PyTorch or CUDA missing)."""


@dataclass(frozen=True)
class Backend:
    """An array namespace and a device.

    Attributes:
        name: ``"numpy"`` or ``"torch"``.
        xp: the array-API namespace (``numpy``, or ``array_api_compat.torch``).
        device: the device object arrays are created on (``"cpu"`` for numpy).
        float_dtype: the working float dtype of this namespace.
    """

    name: str
    xp: Any
    device: Any
    float_dtype: Any
    index_dtype: Any
    float64: Any

    def asarray(self, x, dtype=None) -> Any:
        """``x`` (numpy or list) as an array of this backend, on its device."""
        dtype = self.float_dtype if dtype is None else dtype
        if self.name == "numpy":
            return np.ascontiguousarray(x, dtype=dtype)
        return self.xp.asarray(np.ascontiguousarray(x), dtype=dtype, device=self.device)

    def to_numpy(self, x) -> np.ndarray:
        """A numpy copy (or view) of a backend array."""
        if self.name == "numpy":
            return np.asarray(x)
        return x.detach().to("cpu").numpy()

    def synchronize(self) -> None:
        """Wait for queued device work (CUDA is asynchronous); a no-op elsewhere."""
        if self.name == "torch" and str(self.device).startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)


def torch_available() -> bool:
    """PyTorch and array-api-compat are both importable (the ``gpu`` extra)."""
    try:
        import array_api_compat  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def get_backend(device: str | None = "cpu", dtype: str = "float32") -> Backend:
    """The backend for ``device``.

    ``"cpu"`` (or ``None``) is numpy; ``"torch"`` or ``"torch:cpu"`` is PyTorch on the CPU;
    ``"cuda"`` or ``"cuda:N"`` is PyTorch on that GPU. ``dtype`` is ``"float32"``
    (default) or ``"float64"``.
    """
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    dev = "cpu" if device is None else str(device).strip().lower()
    if dev in ("cpu", "numpy"):
        return Backend("numpy", _NUMPY, "cpu", getattr(np, dtype), np.int64, np.float64)
    if dev in ("torch", "torch:cpu") or dev.startswith("cuda"):
        try:
            import torch
        except ImportError:
            raise BackendError(
                f"device {device!r} needs PyTorch; install the GPU extra: pip install 'motionmatch[gpu]' "
                "(or use --device cpu, which needs only numpy)"
            ) from None
        try:
            from array_api_compat import torch as xp_torch
        except ImportError:
            raise BackendError(
                f"device {device!r} needs array-api-compat; pip install 'motionmatch[gpu]'"
            ) from None
        if dev.startswith("cuda"):
            if not torch.cuda.is_available():
                raise BackendError(f"device {device!r}: CUDA is not available to PyTorch on this machine; use --device cpu")
            tdev = torch.device(dev)
        else:
            tdev = torch.device("cpu")
        return Backend("torch", xp_torch, tdev, getattr(torch, dtype), torch.int64, torch.float64)
    raise ValueError(f"device must be 'cpu', 'torch', 'cuda' or 'cuda:N', got {device!r}")
