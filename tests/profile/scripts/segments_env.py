"""An env + policy + learner loop exercising every automatic segment rule, and the override API."""
import logging

import torch

import perfkit

log = logging.getLogger("segments_env")


class Env:
    num_envs = 8  # class attribute: still detected

    def __init__(self):
        self.state = torch.zeros(self.num_envs, 3)

    def simulate(self):
        self.state.add_(0.01)  # <- physics

    def compute_reward(self):
        return self.state.sum(dim=1)  # <- reward

    def step(self, actions):
        self.simulate()
        r = self.compute_reward()
        with perfkit.segment("custom"):
            self.state.mul_(1.0)  # <- custom
        return self.state, r


@perfkit.segment("policy")
def decorated_policy_helper(x):
    return x * 1  # <- decorated


def log_metrics(r):
    return r.mean()  # <- logging


class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    def forward(self, obs):
        return self.net(obs)


def main(steps=8):
    env = Env()
    pol = Policy()
    opt = torch.optim.SGD(pol.parameters(), lr=0.01)
    obs = env.state
    for _ in range(steps):
        with torch.no_grad():
            a = pol(obs)
        obs, r = env.step(a)
        decorated_policy_helper(r)
        log_metrics(r)
        loss = pol(obs).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("r", end="")
        log.info("step")
    print()


if __name__ == "__main__":
    main()
