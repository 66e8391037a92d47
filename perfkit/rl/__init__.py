"""A small PPO learner for the batched reference env (rollout storage and GAE on the device,
minibatch epochs, no per-step host syncs; metrics read once per iteration)."""

from perfkit.rl.networks import ActorCritic, ObsNormalizer
from perfkit.rl.ppo import METRICS, PPO, PPOConfig
from perfkit.rl.storage import RolloutStorage

__all__ = ["PPO", "PPOConfig", "ActorCritic", "ObsNormalizer", "RolloutStorage", "METRICS"]
