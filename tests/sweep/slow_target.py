"""A toy env factory whose build sleeps at the env count in $PERFKIT_TEST_SLOW_AT (a long point to
interrupt); with the variable unset it is the plain toy env."""

import os
import time

from sweep_toy_env import make_toy_env


def make(num_envs, **kwargs):
    if str(num_envs) == os.environ.get("PERFKIT_TEST_SLOW_AT"):
        time.sleep(120)
    return make_toy_env(num_envs, **kwargs)
