"""A MuJoCo Warp env sharing state with torch zero-copy, with Warp-specific mistakes planted."""

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp


@wp.kernel
def apply_actions(ctrl: wp.array2d(dtype=float), act: wp.array2d(dtype=float), scale: float):
    i, j = wp.tid()
    ctrl[i, j] = act[i, j] * scale  # device code: never linted


@wp.kernel
def compute_reward_kernel(qvel: wp.array2d(dtype=float), rew: wp.array(dtype=float)):
    i = wp.tid()
    rew[i] = qvel[i, 0]


class WarpAntEnv:
    def __init__(self, xml: str, num_envs: int, device: str = "cuda:0"):
        self.num_envs = num_envs
        self.mjm = mujoco.MjModel.from_xml_string(xml)
        self.m = mjw.put_model(self.mjm)
        self.d = mjw.make_data(self.mjm, nworld=num_envs)
        self.rew = wp.zeros(num_envs, dtype=float)
        self.act_wp = wp.zeros((num_envs, self.mjm.nu), dtype=float)
        self.qpos_t = wp.to_torch(self.d.qpos)
        self.qvel_t = wp.to_torch(self.d.qvel)
        self.rew_t = wp.to_torch(self.rew)
        self.act_t = wp.to_torch(self.act_wp)
        with wp.ScopedCapture() as capture:
            mjw.step(self.m, self.d)
        self.graph = capture.graph
        self.side = torch.cuda.Stream()  # observations are post-processed on a side stream
        self.qpos_init = self.d.qpos.numpy()  # __init__ is not a hot path

    def step(self, actions: torch.Tensor):
        self.act_t.copy_(actions)
        wp.launch(apply_actions, dim=(self.num_envs, self.mjm.nu), inputs=[self.d.ctrl, self.act_wp, 1.0])  # expect: PK501
        wp.capture_launch(self.graph)  # expect: PK501
        wp.synchronize()  # expect: PK111
        wp.launch(compute_reward_kernel, dim=self.num_envs, inputs=[self.d.qvel, self.rew],
                  stream=wp.stream_from_torch())
        height = self.d.qpos.numpy()[:, 2]  # expect: PK112
        with torch.cuda.stream(self.side):  # torch reads the shared arrays on a non-blocking stream
            obs = torch.cat([self.qpos_t, self.qvel_t], dim=-1)
        return obs, self.rew_t, torch.from_numpy(height).to(obs.device) < 0.2  # expect: PK109

    # perfkit: hot
    def step_scoped(self, actions: torch.Tensor):
        self.act_t.copy_(actions)
        with wp.ScopedStream(wp.stream_from_torch()):  # one stream: no hazard
            wp.launch(apply_actions, dim=(self.num_envs, self.mjm.nu), inputs=[self.d.ctrl, self.act_wp, 1.0])
            wp.capture_launch(self.graph)
        torch.cuda.synchronize()  # expect: PK110
        return self.qpos_t

    def debug_dump(self):
        # not a hot path
        wp.synchronize_device()
        return self.d.qvel.numpy()
