"""scripts/gpu/pyspy_causes.py (py-spy's samples of the manager env, plain against perfkit) on the CPU:
how it reads py-spy's raw stacks — only the script's timed ``learn`` call, each sample in one class by
its innermost frame and in each rsl_rl phase it is under."""

from __future__ import annotations

from _overhead_helpers import ROOT, load_script

SCRIPT = ROOT / "scripts" / "gpu" / "pyspy_causes.py"


def test_the_timed_learn_calls_samples_by_class_and_by_phase(tmp_path):
    pc = load_script(SCRIPT, "pyspy_causes_script")
    runner = "OnPolicyRunner.learn (/s/rsl_rl/runners/on_policy_runner.py:90)"

    def stack(caller_line: int, *frames: str) -> str:
        return ";".join([f"<module> (train.py:{caller_line})", runner, *frames])

    update = "PPO.update (/s/rsl_rl/algorithms/ppo.py:210)"
    step = "RslRlVecEnvWrapper.step (/e/wrapper.py:40)"
    raw = tmp_path / "perfkit-0.raw.txt"
    raw.write_text("\n".join([
        stack(10, update, "Tensor.backward (/t/_tensor.py:600)") + " 7",  # the warm-up call: left out
        stack(20, update, "Tensor.backward (/t/_tensor.py:600)") + " 5",
        stack(20, update, "_confirmed_sync_call (/r/perfkit/collectors/hub.py:201)") + " 2",
        stack(20, step, "showwarning (/usr/lib/warnings.py:100)") + " 3",
        stack(20, "Logger.log (/s/rsl_rl/utils/logger.py:196)") + " 1",
        "<module> (train.py:5);import_module (/usr/lib/importlib.py:1) 9",  # outside learn: left out
    ]) + "\n")
    got = pc.summarize_raw(str(raw))
    assert got["classes"] == {"program": 6, "perfkit": 2, "warnings": 3}
    assert got["phases"] == {"all": 11, "learning (PPO.update)": 7, "env step": 3, "logging": 1}
    text = pc.report(str(tmp_path), [{"arm": "perfkit", "round": 0, "sps": 1.0, "raw": raw.name}], rate=100, steps=10)
    assert "| perfkit | 0 | 11.00 | 7.00 | 3.00 | 0.00 | 0.00 | 1.00 |" in text  # samples / rate / steps, in ms
