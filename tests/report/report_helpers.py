"""Shared material for the report tests: synthetic run records and a headless-Chromium probe."""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from perfkit.record import Finding, Run, SegmentStats

MACHINE = {"device": "NVIDIA H200", "driver": "580.65", "cuda": "13.0", "torch": "2.11.0", "warp": "1.19.0",
           "mujoco": "4.0.0", "mujoco_warp": "4.0.0", "python": "3.12.3", "cpu": "x86_64", "cpu_count": 16,
           "gpu_memory_bytes": 150 * 2**30}
ENV = {"name": "ant", "backend": "mjwarp", "device": "cuda:0", "sim_dt": 0.005, "decimation": 4, "policy_dt": 0.02,
       "obs_dim": 27, "act_dim": 8, "episode_length": 1000, "rendering": False}


def make_run(script="examples/train.py", sps=1.2e6, step_ms=3.4, findings=(), seed=0, **segments):
    rng = random.Random(seed)
    times = [step_ms * (1 + 0.08 * rng.random()) for _ in range(200)]
    segs = segments or {"physics": 1.9, "policy": 0.6, "reward": 0.2, "learner": 0.5, "logging": 0.05, "other": 0.15}
    run = Run(command=[script, "--num-envs", "4096"], steps=200, num_envs=4096, wall_s=0.68, warmup_s=12.5, sps=sps,
              step_ms={"p50": step_ms, "p99": step_ms * 1.3, "mean": step_ms * 1.04},
              segments={k: SegmentStats(gpu_ms_per_step=v, cpu_ms_per_step=v / 3) for k, v in segs.items()},
              findings=list(findings), machine=dict(MACHINE), env=dict(ENV), step_times_ms=times,
              memory={"peak_gpu_bytes": 3 * 2**30, "gpu_used_bytes": 5 * 2**30})
    run.extra["physics_sps"] = sps * 4
    return run


NAIVE_FINDINGS = [
    Finding(kind="sync", op=".item()", path="examples/train_naive.py", line=42, function="step", segment="logging",
            count=200, per_step=1.0, est_ms_per_step=0.35, message="keep the value on the GPU",
            code="mean_r = reward.mean().item()"),
    Finding(kind="alloc", op="torch.zeros", path="examples/train_naive.py", line=57, function="compute_reward",
            segment="reward", count=400, per_step=2.0, est_ms_per_step=0.02, message="preallocate in __init__"),
    Finding(kind="loop", op="for-loop over envs", path="examples/train_naive.py", line=71, function="reset_done",
            segment="other", count=200, per_step=1.0, est_ms_per_step=1.1, message="use a boolean mask"),
]


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


PROBE = """<script>
window.__perfkitErrors = [];
window.addEventListener('error', function (e) {
  var t = e.target;
  window.__perfkitErrors.push(t && t !== window ? 'resource failed: ' + (t.src || t.href || t.tagName) : String(e.message));
}, true);
(function () { var ce = console.error; console.error = function () {
  window.__perfkitErrors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments); }; })();
window.addEventListener('load', function () {
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {alt: i.alt, src: i.getAttribute('src').slice(0, 30), loaded: i.complete && i.naturalWidth > 0, width: i.naturalWidth}; });
  var out = document.createElement('pre'); out.id = 'perfkit-probe';
  out.textContent = JSON.stringify({images: imgs, errors: window.__perfkitErrors, scripts: document.scripts.length,
                                    title: document.title, h2: Array.prototype.map.call(document.querySelectorAll('h2'), function (h) { return h.textContent; })});
  document.body.appendChild(out);
});
</script>"""


def chromium_args(binary, profile_dir):
    return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile_dir}"]


def load_in_chromium(html_path: Path, tmp_path: Path) -> dict:
    """Open the page (with a probe script injected first thing in <head>) and return what the probe saw."""
    import json
    import re

    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    probed = html_path.with_name("probed_" + html_path.name)
    probed.write_text(html_path.read_text().replace("<head>", "<head>" + PROBE, 1))
    res = subprocess.run([*chromium_args(binary, tmp_path / "chromium-profile"), "--virtual-time-budget=5000",
                          "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="perfkit-probe">(.*?)</pre>', res.stdout, re.S)
    assert m, f"probe did not run; chromium said: {res.stderr[-2000:]}"
    import html as _html

    return json.loads(_html.unescape(m.group(1))) | {"dom": res.stdout}


def screenshot(html_path: Path, png: Path, tmp_path: Path, height=2600) -> Path:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed")
    subprocess.run([*chromium_args(binary, tmp_path / "chromium-profile-shot"), f"--window-size=1280,{height}",
                    f"--screenshot={png}", html_path.as_uri()], capture_output=True, timeout=120)
    return png
