"""A loop with a logger class and a subclass of it not named like one: every method of either is
logging, whatever its name (``compute_reward_stats``, ``update``, ``summarize``), and ``log()`` runs
once per "iteration" of 8 steps, after the update, first after the warm-up window has closed."""
import torch


class Env:
    def __init__(self):
        self.num_envs = 8
        self.state = torch.zeros(self.num_envs, 3)

    def step(self, actions):
        self.state.add_(actions)
        return self.state, self.state.sum(1)


class EpisodeLogger:
    def __init__(self):
        self.returns = torch.zeros(8)

    def process_env_step(self, rewards):
        self.returns += rewards
        return bool(self.returns.max() > 1e9)  # <- every step

    def compute_reward_stats(self):
        return self.returns.mean().item()  # <- reward-named

    def update(self, stats):
        return float(self.returns.std())  # <- update-named

    def log(self, it):
        self.update(self.compute_reward_stats())
        return self.returns.tolist()  # <- log


class Tracker(EpisodeLogger):
    def summarize(self):
        return self.returns.sum().item()  # <- subclass


def main(steps=40):
    env, logger = Env(), Tracker()
    policy = torch.nn.Linear(3, 3)
    opt = torch.optim.SGD(policy.parameters(), lr=0.01)
    obs = env.state
    for i in range(steps):
        with torch.no_grad():
            a = policy(obs) * 0.01
        obs, r = env.step(a)
        logger.process_env_step(r)
        if i % 8 == 7:
            loss = policy(obs).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            logger.log(i)
            logger.summarize()
