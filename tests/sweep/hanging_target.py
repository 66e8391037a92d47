"""A sweep target whose import never finishes (a hung point): the sweep must give up on it."""

import time

time.sleep(120)


def make(num_envs):  # pragma: no cover - never reached
    raise AssertionError("unreachable")
