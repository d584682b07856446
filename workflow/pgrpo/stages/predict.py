"""Stage ``pgrpo predict``: Theorem 7 for one configuration, printed or written atomically."""

from __future__ import annotations

from pgrpo.tables.prediction import prediction_report


def run_predict(eta: float, mu: float, k_ref: int, K: float, r0: float | None = None, r_inf: float | None = None,
                steps: int | None = None, delta: float = 1.0, out_path: str | None = None) -> str:
    """``pgrpo predict``: print the prediction report (and write it atomically to ``out_path`` if given)."""
    text = prediction_report(eta, mu, K, k_ref, r0=r0, r_inf=r_inf, steps=steps, delta=delta)
    if out_path is not None:
        from pgrpo.atomic import write_text

        write_text(out_path, text)
    print(text, end="")
    return text
