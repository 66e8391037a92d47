"""The MDP of the manager env: its term functions, by kind (as Isaac Lab's ``envs.mdp`` package)."""

from manager_env.mdp.commands import *  # noqa: F401,F403
from manager_env.mdp.events import *  # noqa: F401,F403
from manager_env.mdp.observations import *  # noqa: F401,F403
from manager_env.mdp.rewards import *  # noqa: F401,F403
from manager_env.mdp.terminations import *  # noqa: F401,F403
