"""The models the reference env knows, and the task constants that go with each.

A :class:`ModelSpec` says where the MJCF comes from, how the physics is sized for MuJoCo Warp
(``nconmax``/``njmax`` per world, chosen from the model's contact structure rather than Warp's
defaults), and the locomotion task on top of it (decimation, horizon, reward weights, healthy
range, reset noise). Both backends read the same spec, so their observations, rewards and
terminations are defined once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

ASSETS = os.path.join(os.path.dirname(__file__), "assets")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    decimation: int  # physics substeps per env step
    max_episode_steps: int  # horizon (truncation), in env steps
    healthy_z: tuple[float, float]  # torso height outside this range terminates the episode
    forward_weight: float  # reward per m/s of torso velocity along +x
    healthy_reward: float  # reward per env step while healthy
    ctrl_cost: float  # penalty weight on sum(action**2)
    reset_noise: float  # uniform joint-angle / velocity noise at reset (root pose untouched)
    max_qvel: float  # a world whose |qvel| exceeds this (or is NaN) is treated as diverged
    nconmax: int  # MuJoCo Warp contacts per world
    njmax: int  # MuJoCo Warp constraint rows per world

    def xml_path(self) -> str:
        if self.name == "ant":
            return os.path.join(ASSETS, "ant.xml")
        if self.name == "humanoid":
            # MuJoCo's humanoid, read at run time from the installed mujoco_warp package's test data
            # (third-party file; not copied into this repository).
            import mujoco_warp

            path = os.path.join(os.path.dirname(mujoco_warp.__file__), "test_data", "humanoid", "humanoid.xml")
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"humanoid model not found at {path}: the installed mujoco_warp package does not ship "
                    "its test data; install mujoco-warp from a wheel that includes mujoco_warp/test_data"
                )
            return path
        raise ValueError(f"no MJCF for model {self.name!r}")


SPECS: dict[str, ModelSpec] = {
    # 4 feet x (condim 3, pyramidal: 4 rows) + 8 joint limits = 24 rows at most (19 measured). ant.xml gives the
    # Newton solver 10 iterations: it converges, so both backends agree (tests/envs/test_backends_agree.py).
    "ant": ModelSpec(
        name="ant",
        decimation=4,
        max_episode_steps=250,
        healthy_z=(0.26, 1.0),
        forward_weight=1.0,
        healthy_reward=0.5,
        ctrl_cost=0.05,
        reset_noise=0.1,
        max_qvel=100.0,
        nconmax=8,
        njmax=32,
    ),
    # Capsule body, all geoms collide with the floor (condim 3, pyramidal: 4 rows per contact) plus
    # 21 limited hinges. Measured with MuJoCo C under random actions until termination (30 episodes):
    # at most 8 contacts (mean 1.4) and 25 constraint rows per world. MuJoCo Warp needs more: on the
    # H200 at 16384 worlds nconmax=16 overflowed its broadphase (candidate pairs, not contacts) and
    # njmax=64 its constraint rows, so: MuJoCo Warp's own default nconmax for this model (48) and 2x
    # its default njmax (64).
    "humanoid": ModelSpec(
        name="humanoid",
        decimation=3,
        max_episode_steps=1000,
        healthy_z=(1.0, 2.0),
        forward_weight=1.25,
        healthy_reward=5.0,
        ctrl_cost=0.1,
        reset_noise=0.01,
        max_qvel=200.0,
        nconmax=48,
        njmax=128,
    ),
}


def get_spec(name: str) -> ModelSpec:
    if not isinstance(name, str) or name not in SPECS:
        raise ValueError(f"unknown env name {name!r}; expected one of {sorted(SPECS)}")
    return SPECS[name]


@lru_cache(maxsize=None)
def load_mjmodel(name: str):
    """The compiled ``mujoco.MjModel`` for ``name`` (cached: compiling MJCF is not free)."""
    import mujoco

    return mujoco.MjModel.from_xml_path(get_spec(name).xml_path())
