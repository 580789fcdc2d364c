"""Just enough of `torch` to run gpu_workers' torch code paths without a GPU:
allocations are bookkeeping, and one bigger than `capacity` raises an
OutOfMemoryError whose class lives in a module named `torch`."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

GiB = 2**30


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (also torch.cuda.OutOfMemoryError)."""


OutOfMemoryError.__module__ = "torch"


class FakeTensor:
    def __init__(self, numel: int, element_size: int = 1) -> None:
        self._numel = numel
        self.element_size = element_size

    def numel(self) -> int:
        return self._numel

    def fill_(self, value: Any) -> FakeTensor:
        return self

    def __getitem__(self, item: Any) -> FakeTensor:
        return FakeTensor(8, self.element_size)

    def float(self) -> FakeTensor:
        return self

    def sum(self) -> FakeTensor:
        return self

    def item(self) -> float:
        return float(self._numel)


def make_fake_torch(
    capacity: int = 140 * GiB, broken: bool = False
) -> types.ModuleType:
    """A module object standing in for torch; `calls` records what ran."""
    torch = types.ModuleType("torch")
    calls: list[str] = []
    torch.calls = calls  # type: ignore[attr-defined]
    torch.OutOfMemoryError = OutOfMemoryError  # type: ignore[attr-defined]
    torch.uint8 = "uint8"  # type: ignore[attr-defined]
    torch.bfloat16 = "bfloat16"  # type: ignore[attr-defined]

    def alloc(nbytes: int) -> None:
        if broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if nbytes > capacity:
            raise OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {nbytes / GiB:.2f} GiB."
            )

    def empty(*shape: int, dtype: Any = None, device: Any = None) -> FakeTensor:
        size = 2 if dtype == "bfloat16" else 1
        n = 1
        for s in shape:
            n *= s
        alloc(n * size)
        calls.append(f"empty {n * size}")
        return FakeTensor(n, size)

    def randn(*shape: int, device: Any = None, dtype: Any = None) -> FakeTensor:
        return empty(*shape, dtype=dtype, device=device)

    def ones(n: int, device: Any = None) -> FakeTensor:
        alloc(4 * n)
        calls.append("ones")
        return FakeTensor(n, 4)

    def matmul(
        a: FakeTensor, b: FakeTensor, out: FakeTensor | None = None
    ) -> FakeTensor:
        calls.append("matmul")
        return out or a

    class Stream:
        def __init__(self, device: Any = None) -> None:
            self.device = device

        def synchronize(self) -> None:
            calls.append("sync")

    @contextlib.contextmanager
    def stream(s: Stream) -> Iterator[None]:
        yield

    cuda = types.SimpleNamespace(
        OutOfMemoryError=OutOfMemoryError,
        Stream=Stream,
        stream=stream,
        is_initialized=lambda: True,
        synchronize=lambda: calls.append("synchronize"),
        empty_cache=lambda: calls.append("empty_cache"),
    )
    torch.cuda = cuda  # type: ignore[attr-defined]
    torch.device = lambda spec, index=None: spec  # type: ignore[attr-defined]
    torch.empty = empty  # type: ignore[attr-defined]
    torch.randn = randn  # type: ignore[attr-defined]
    torch.ones = ones  # type: ignore[attr-defined]
    torch.matmul = matmul  # type: ignore[attr-defined]
    return torch
