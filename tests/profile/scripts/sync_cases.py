"""One function per sync kind; the line that syncs carries a `# <- op` marker (the tests read it).

Tensors live on ``PK_CASES_DEVICE`` (default cpu; the GPU tests load this file with cuda)."""
import os

import numpy as np
import torch

DEVICE = os.environ.get("PK_CASES_DEVICE", "cpu")
x = torch.arange(6.0, device=DEVICE)
mask = x > 2
idx = torch.tensor([0, 2], device=DEVICE)
reps = torch.tensor([1, 2, 1, 1, 1, 1], device=DEVICE)


def item():
    return x.sum().item()  # <- .item()


def cpu():
    return x.cpu()  # <- .cpu()


def cpu_numpy():
    return x.cpu().numpy()  # <- .cpu()


def to_cpu():
    return x.to("cpu")  # <- .to("cpu")


def to_cpu_numpy():
    return x.to("cpu").numpy()  # <- .to("cpu")


def numpy():  # CPU only: a CUDA tensor has no .numpy() (its sync is the .cpu() of cpu_numpy)
    return x.numpy()  # <- .numpy()


def tolist():
    return x.tolist()  # <- .tolist()


def bool_if():
    if x.sum():  # <- bool(t)
        return 1
    return 0


def bool_call():
    return bool(x[0])  # <- bool(t)


def float_call():
    return float(x[1])  # <- float(t)


def int_call():
    return int(x[1])  # <- int(t)


def index_call():
    return list(range(10))[x[2].long()]  # <- index(t)


def fstring():
    return f"{x.sum():.2f}"  # <- format(t)


def print_tensor():
    print(x)  # <- print(t)


def mask_read():
    return x[mask]  # <- t[bool_mask]


def list_index():
    return x[[0, 1]]  # <- t[list]


def where_one():
    return torch.where(mask)  # <- torch.where(cond)


def nonzero():
    return mask.nonzero()  # <- .nonzero()


def torch_nonzero():
    return torch.nonzero(mask)  # <- .nonzero()


def masked_select():
    return x.masked_select(mask)  # <- .masked_select()


def unique():
    return x.unique()  # <- .unique()


def torch_unique():
    return torch.unique(x)  # <- .unique()


def repeat_interleave():
    return x.repeat_interleave(reps)  # <- .repeat_interleave()


def tensor_list():
    return torch.tensor([1.0, 2.0], device=DEVICE)  # <- torch.tensor(list, device=cuda)


def mask_write():
    y = x.clone()
    y[mask] = x[:3] * 0  # <- t[bool_mask] = v


def list_write():
    y = x.clone()
    y[[0, 1]] = 0.0  # <- t[list] = v


def contains():
    return 3.0 in x  # <- x in t


def ndarray_index():
    return x[np.array([0, 2])]  # <- t[ndarray]


def ndarray_write():
    y = x.clone()
    y[np.array([0, 2])] = x[:2]  # <- t[ndarray] = v


# --- not syncs: each must count zero -----------------------------------------------------------------
def clean_where3():
    return torch.where(mask, x, 0.0)


def clean_index_tensor():
    return x[idx]


def clean_slice():
    return x[1:3]


def clean_repeat_sized():
    return x.repeat_interleave(reps, output_size=7)


def clean_tensor_no_device():
    return torch.tensor([1.0, 2.0])


def clean_mask_fill_scalar():
    y = x.clone()
    y[mask] = 0.0  # masked_fill_ fast path


def clean_to_device_variable():
    dev = x.device  # on a CPU-only run this is cpu: not the user's sync
    return x.to(dev)


def clean_to_dtype():
    return x.to(torch.float64)


def clean_inplace():
    x.mul_(1.0)
    return x


# nothing to copy, or nowhere to copy it: the runtime does not wait
def clean_tensor_empty():
    return torch.tensor([], device=DEVICE)


def clean_tensor_empty_nested():
    return torch.tensor([[], []], device=DEVICE)


def clean_empty_list_index():
    return x[[]]


def clean_empty_ndarray_index():
    return x[np.array([], dtype=np.int64)]


def empty_list_scalar_write():
    # nothing selected, yet the Python scalar is still copied to the device: 1 runtime sync on the H200
    y = x.clone()
    y[[]] = 0.0  # <- t[list] = v


def clean_to_cpu_non_blocking():  # a pinned host copy: the host goes on
    return x.to("cpu", non_blocking=True)


def clean_to_cpu_empty():
    return x[:0].to("cpu")
