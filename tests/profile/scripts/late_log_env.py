"""A loop whose logging methods are first called after the discovery window has closed (once per
"iteration" of 8 steps, warm-up 2), beside math methods named log_prob / logits / logsumexp."""
import torch


class Env:
    max_episode_steps = 500

    def __init__(self):
        self.num_envs = 8
        self.device = torch.device("cpu")
        self.state = torch.zeros(self.num_envs, 3)

    def step(self, actions):
        self.state.add_(actions)
        return self.state


class Trainer:
    def __init__(self):
        self.acc = torch.zeros(())

    def logits(self, obs):
        return obs * 2.0

    def log_prob(self, x):
        return float(x.sum().item())  # <- math

    def logsumexp(self, x):
        return x.logsumexp(0)

    def _log_metrics(self):
        return self.acc.item()  # <- metrics

    def log_iteration(self):
        v = self.acc.tolist()  # <- iteration
        self._log_metrics()
        return v


def main(steps=24):
    env, tr = Env(), Trainer()
    obs = env.state
    for i in range(steps):
        a = tr.logits(obs)
        obs = env.step(a * 0.0)
        if i >= 4:
            tr.log_prob(tr.logsumexp(obs))
        if i % 8 == 7:
            tr.log_iteration()
