"""An Isaac-Lab-style manager-based RL task on perfkit's reference physics — the kind of env that
users train through a library, and that perfkit must profile without breaking it.

    env.py          ManagerBasedRLEnv: actions -> physics (decimation substeps; one CUDA graph on
                    MuJoCo Warp) -> managers -> resets of the envs that are done -> observations
    managers.py     Action/Observation/Reward/Termination/Command/Event managers and term configs
    mdp/            the term functions: rewards, observations, terminations, commands, events
    math_utils.py   quaternion and angle helpers compiled with @torch.jit.script
    scene.py        the robot (reference ant) as an articulation over the simulator's state
    physics.py      the reference env's MuJoCo Warp / MuJoCo C backends without their own task
    env_cfg.py      the task: velocity tracking, a dozen reward terms, terminations, commands, events
    wrapper.py      rsl_rl's VecEnv over it (Isaac Lab's RslRlVecEnvWrapper shape)
    train_rsl_rl.py training with rsl_rl's OnPolicyRunner; prints ``SPS: <float>`` last

The env keeps the host-device syncs real manager envs make (``nonzero`` to find the envs to reset
and the commands to resample, ``.any()`` on event timers, list-indexed joints in a reward term,
``.item()`` episode statistics on reset, ``torch.tensor`` of sampling ranges in reset events) and
runs some 400 small torch ops per step; ``train_rsl_rl.py``'s module docstring says how it is run.
"""

from manager_env.env import ManagerBasedRLEnv
from manager_env.env_cfg import ManagerBasedRLEnvCfg, ant_velocity_env_cfg

__all__ = ["ManagerBasedRLEnv", "ManagerBasedRLEnvCfg", "ant_velocity_env_cfg"]  # wrapper.py needs rsl_rl: imported on its own
