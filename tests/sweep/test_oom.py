"""The one out-of-memory check (perfkit.sweeps.oom), as the sweep (a log) and its worker (an exception) use it."""

import pytest
import torch

from perfkit.sweeps import runner as sweep
from perfkit.sweeps import worker as sweep_worker
from perfkit.sweeps.oom import is_oom, is_oom_text

# every message either of the two old patterns knew, and the exception names a traceback prints
OOM_MESSAGES = [
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "torch.OutOfMemoryError: CUDA out of memory.",
    "MemoryError",
    "Failed to allocate 1073741824 bytes on device 'cuda:0'",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation: out of memory",
    "mmap: can't allocate memory",
    "OSError: [Errno 12] Cannot allocate memory",
]
NOT_OOM = ["shape mismatch", "RuntimeError: CUDA error: an illegal memory access was encountered",
           "Failed to allocate a buffer", "memory usage: 3 GiB", "MemoryErrorHandler registered", ""]


@pytest.mark.parametrize("text", OOM_MESSAGES)
def test_every_known_oom_message_is_oom_for_both_checks(text):
    assert is_oom_text(text) and is_oom_text(f"Traceback ...\n  {text.lower()}\n")
    assert is_oom(RuntimeError(text))


@pytest.mark.parametrize("text", NOT_OOM)
def test_other_messages_are_not_oom(text):
    assert not is_oom_text(text)
    assert not is_oom(RuntimeError(text))


def test_exception_types():
    assert is_oom(MemoryError())
    assert is_oom(torch.cuda.OutOfMemoryError("anything"))
    assert not is_oom(ValueError("out of memory"))  # only runtime errors carry allocator messages
    assert not is_oom(KeyboardInterrupt())


def test_sweep_and_worker_use_this_check():
    assert sweep_worker.is_oom is is_oom
    assert sweep.is_oom_text is is_oom_text
