"""Warp sync kinds on a CPU device (would-sync-on-GPU); `# <- op` marks the line."""
import warp as wp

wp.config.quiet = True
wp.init()
arr = wp.zeros(4, dtype=wp.float32, device="cpu")


def synchronize():
    wp.synchronize()  # <- wp.synchronize()


def synchronize_device():
    wp.synchronize_device("cpu")  # <- wp.synchronize_device()


def numpy():
    return arr.numpy()  # <- wp.array.numpy()


def to_list():
    return arr.list()  # <- wp.array.list()
