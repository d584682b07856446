"""The learning rate of the heavy-ball map (3) that an optimizer step realises: ``log.csv``'s
``effective_learning_rate`` column, read by the deep-network K_ref sweep (Section 5.6, "Scope"; Theorem 7).

- **SGD with momentum** (``training.optimizer: sgd``): ``torch.optim.SGD`` is the map (3) itself,
  ``v = mu v + g, theta -= eta v`` i.e. ``theta_{k+1} - theta_k = -eta g_k + mu (theta_k - theta_{k-1})``: the
  effective learning rate is the scheduled learning rate.
- **Adam** (``beta1 = mu``): with the second moment held fixed, ``m_k = beta1 m_{k-1} + (1 - beta1) g_k`` and
  ``theta_{k+1} - theta_k = -lr m_k / (sqrt(v_hat) + eps)`` give
  ``theta_{k+1} - theta_k = mu (theta_k - theta_{k-1}) - lr (1 - beta1) g_k / (sqrt(v_hat) + eps)`` (once the
  first moment's bias correction has reached 1): a heavy ball with a per-coordinate rate
  ``lr (1 - beta1) / (sqrt(v_hat_i) + eps)``. The scalar reported is that rate along the gradient, the Rayleigh
  quotient ``g . P g / g . g`` of the preconditioner ``P`` with the gradient's energy ``g_i^2`` estimated by
  ``v_hat_i`` (Adam's ``exp_avg_sq`` over ``1 - beta2^t``), read from the optimizer state after each step.
"""

from __future__ import annotations

import math


def adam_effective_learning_rate(optimizer) -> float:
    """``(1 - beta1) lr sum_i v_hat_i / (sqrt(v_hat_i) + eps) / sum_i v_hat_i`` over every parameter with Adam state
    (see the module docstring); NaN before the first step or without any gradient energy."""
    weighted = total = 0.0
    for group in optimizer.param_groups:
        beta1, beta2 = group["betas"]
        lr, eps = float(group["lr"]), float(group["eps"])
        for param in group["params"]:
            state = optimizer.state.get(param) or {}
            if "exp_avg_sq" not in state:
                continue
            step = float(state["step"])
            v_hat = state["exp_avg_sq"].detach().double() / (1.0 - beta2 ** step)
            energy = float(v_hat.sum())
            if energy > 0:
                weighted += (1.0 - beta1) * lr * float((v_hat / (v_hat.sqrt() + eps)).sum())
                total += energy
    return weighted / total if total > 0 else math.nan


def sgd_effective_learning_rate(optimizer) -> float:
    """The scheduled learning rate (the map (3)'s eta) of the first parameter group."""
    return float(optimizer.param_groups[0]["lr"])


def effective_learning_rate(optimizer) -> float:
    """Adam's heavy-ball rate when the optimizer holds Adam state (``betas``), else SGD's learning rate."""
    if "betas" in optimizer.param_groups[0]:
        return adam_effective_learning_rate(optimizer)
    return sgd_effective_learning_rate(optimizer)


def effective_step_callback_class():
    from transformers import TrainerCallback

    class EffectiveStepCallback(TrainerCallback):
        """Adds ``effective_learning_rate`` to each optimizer step's train log (before the row is written)."""

        def on_log(self, args, state, control, logs=None, optimizer=None, **kwargs):
            if logs is None or optimizer is None or "loss" not in logs or "train_runtime" in logs:
                return
            inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
            logs["effective_learning_rate"] = effective_learning_rate(inner)

    return EffectiveStepCallback
