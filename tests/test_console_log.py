"""Console logs read as logs (pgrpo.grpo.console_log, pgrpo.stages.logs): a real TRL job's output checked against the
corpus log a session-17 helper transcribed from it by hand-written code (steps counted from the learning-rate
schedule, values rounded to 6 significant digits), and the layouts' rules on hand-made text."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import pytest

from pgrpo.errors import InputError
from pgrpo.grpo.console_log import parse_console_log, parse_printed_dict
from pgrpo.stages.live import run_replay, run_watch
from pgrpo.stages.logs import planned_steps, read_run_log, resolve_log_path

DATA = Path(__file__).resolve().parent / "data" / "console_logs"
CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "forecast" / "data"


def _real_trl_log(folder: Path) -> Path:
    """`logs/final_hard_difficulty/hard_no_std.log` of Caitlyn-Yin/grpo_norm (SOURCES.md here), as a SLURM output."""
    path = folder / "slurm-4242.out"
    path.write_bytes(gzip.decompress((DATA / "grpo_norm_hard_no_std.log.gz").read_bytes()))
    return path


def _close(a: float, b: float) -> bool:
    """Equal to the 6 significant digits the corpus transcription kept."""
    return math.isclose(a, b, rel_tol=5e-6, abs_tol=1e-12)


def test_a_real_trl_console_log_reads_as_the_corpus_transcribed_it(tmp_path):
    frame = read_run_log(_real_trl_log(tmp_path))
    corpus = json.loads((CORPUS / "caitlynyin_qwen25math_15b_gsm8k_hard_nostd.json").read_text())["log_history"]
    assert frame["step"].tolist() == [entry["step"] for entry in corpus] == list(range(5, 401, 5))
    for column in ("reward", "reward_std", "frac_reward_zero_std", "kl", "entropy", "grad_norm",
                   "completions/mean_length", "rewards/correctness_reward_func_qa/mean"):
        ours = frame.set_index("step")[column]
        assert all(_close(ours[entry["step"]], entry[column]) for entry in corpus), column
    # its stdout was buffered: the progress bar (stderr) runs ahead of the dicts, and the reader says how it counted
    console = parse_console_log((tmp_path / "slurm-4242.out").read_text(errors="replace"))
    assert console.step_source == "entry count" and console.max_steps == 400 and "buffered" in console.notes[0]
    assert console.skipped == 2  # the tokenizer's printed dict and the end-of-training summary
    assert planned_steps(tmp_path / "slurm-4242.out", None) == 400.0


def test_a_real_verl_console_log_reads_its_step_lines_under_trls_names(tmp_path):
    """`training.log` of miachen0401/news_GRPO (SOURCES.md here: the values below were printed from it by its
    collector's own script, before this reader existed)."""
    path = tmp_path / "training.log"
    path.write_bytes(gzip.decompress((DATA / "verl_grpo_excerpt.log.gz").read_bytes()))
    frame = read_run_log(path).set_index("step")
    assert frame.index.tolist() == list(range(0, 26))  # the initial validation at step 0, then 25 training steps
    assert frame.loc[1, "reward"] == 0.9949216842651367 and frame.loc[25, "reward"] == 1.6999999284744263
    assert frame.loc[1, "entropy"] == 0.5986417531967163 and frame.loc[25, "entropy"] == 0.5708059668540955
    assert frame.loc[1, "grad_norm"] == 1.7255384922027588 and frame.loc[25, "grad_norm"] == 0.012721294537186623
    assert frame["eval_reward"].dropna().to_dict() == {0: 0.9920433996383365, 20: 1.6792043399638334}
    assert "kl" not in frame.columns  # use_kl_loss: False, so no actor/kl_loss


def test_the_real_console_log_is_watched_and_replayed_from_its_folder(tmp_path):
    _real_trl_log(tmp_path)
    assert resolve_log_path(tmp_path).name == "slurm-4242.out"
    result = run_replay(str(tmp_path), every=10, quiet=True)
    assert [read["step"] for read in result["reads"]] == list(range(50, 401, 50))  # 80 logs, a read every 10
    reads = run_watch(str(tmp_path), once=True, out_dir=str(tmp_path / "watch")).reads
    assert reads[-1].step == 400.0 and reads[-1].total_steps == 400.0
    assert json.loads((tmp_path / "watch" / "live.json").read_text())["live"]["step"] == 400


def test_a_checkpoint_beats_a_console_log_in_a_folder_and_the_newest_console_log_wins(tmp_path):
    (tmp_path / "old.log").write_text("{'loss': 0.1, 'reward': 0.2}\n")
    newer = tmp_path / "slurm-2.out"
    newer.write_text("{'loss': 0.1, 'reward': 0.3}\n")
    os.utime(tmp_path / "old.log", (1, 1))
    assert resolve_log_path(tmp_path) == newer  # slurm-*.out before *.log, then the newest
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-5" / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 5}]}))
    assert resolve_log_path(tmp_path).name == "trainer_state.json"


def test_progress_bar_counts_place_unbuffered_logs_and_an_eval_log_takes_its_step():
    text = ("  0%|          | 0/30 [00:00<?, ?it/s]\n"
            "\r 33%|###       | 10/30 [00:10<00:20, 1.0s/it]\n{'loss': 0.0, 'reward': 0.25, 'kl': np.float64(0.001), "
            "'epoch': 0.33}\n"
            "\r  0%|          | 0/4 [00:00<?, ?it/s]\r100%|##########| 4/4 [00:01<00:00, 4.0it/s]\n"
            "{'eval_loss': 0.3, 'eval_reward': 0.5, 'epoch': 0.33}\n"
            "\r 67%|######    | 20/30 [00:20<00:10, 1.0s/it]\n{'loss': 0.0, 'reward': tensor(0.5, device='cuda:0'), "
            "'grad_norm': nan, 'epoch': 0.67}\n")
    console = parse_console_log(text)
    assert console.step_source == "progress bar" and console.max_steps == 30 and not console.notes
    assert [(h["step"], h.get("reward"), h.get("eval_reward")) for h in console.history] == [
        (10, 0.25, None), (10, None, 0.5), (20, 0.5, None)]
    assert console.history[0]["kl"] == 0.001 and math.isnan(console.history[2]["grad_norm"])


def test_a_buffered_log_counts_its_entries_at_the_interval_the_bar_allows():
    # logs every 5 steps, printed in chunks after the bar has moved on (as a block-buffered stdout writes them)
    chunks = [(13, [5, 10]), (24, [15, 20]), (30, [25, 30])]
    text = "".join(f"\r{n}/30 [00:01<00:01, 1.0s/it]\n" + "".join(f"{{'loss': 0.0, 'reward': {s / 100}}}\n"
                                                                 for s in steps) for n, steps in chunks)
    console = parse_console_log(text)
    assert [h["step"] for h in console.history] == [5, 10, 15, 20, 25, 30]
    assert [h["reward"] for h in console.history] == [0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    assert console.step_source == "entry count" and "k x 5" in console.notes[0]


def test_without_a_progress_bar_the_entries_are_counted_and_the_reader_says_so():
    console = parse_console_log("{'loss': 0.1, 'reward': 0.2}\nsome line\n{'loss': 0.1, 'reward': 0.3}\n")
    assert [h["step"] for h in console.history] == [1, 2] and console.step_source == "entry count"
    assert "no progress bar" in console.notes[0]


def test_a_printed_dict_reads_numbers_however_they_print_and_drops_what_is_not_one():
    assert parse_printed_dict("{'a': -inf, 'b': np.float32(-1.5e-3), 'c': float('nan'), 'd': [1, 2], "
                              "'e': 'text', 'f': True}") == {"a": -math.inf, "b": -1.5e-3, "c": pytest.approx(math.nan,
                                                                                                            nan_ok=True),
                                                             "e": "text"}
    assert parse_printed_dict("{'a': 1") is None and parse_printed_dict("[1, 2]") is None


def test_verl_step_lines_one_per_line_or_one_pair_per_line_under_trls_names():
    text = ("(TaskRunner pid=7) Total training steps: 40\n"
            "\x1b[36m(TaskRunner pid=7)\x1b[0m step:1 - critic/score/mean:0.125 - critic/rewards/mean:0.1 - "
            "actor/entropy:np.float64(0.61) - actor/kl_loss:0.0 - actor/grad_norm:0.31 - "
            "response_length/mean:211.5 - response_length/clip_ratio:0.02 - timing_s/gen:20.4\n"
            "(TaskRunner pid=7) step:2 - critic/score/mean:0.25 - actor/kl_loss:nan - "
            "val-core/openai/gsm8k/reward/mean@1:0.45 - val-core/math/reward/mean@1:0.2\n"
            "step:3\n - critic/score/mean:0.375\n - actor/entropy_loss:0.58\n - training/global_step:3\n"
            "other output\n")
    console = parse_console_log(text)
    assert console.layout == "verl" and console.max_steps == 40
    first, second, third = console.history
    assert first == {"step": 1, "reward": 0.125, "entropy": 0.61, "kl": 0.0, "grad_norm": 0.31,
                     "completions/mean_length": 211.5, "completions/clipped_ratio": 0.02, "timing_s/gen": 20.4}
    assert second["step"] == 2 and second["eval_reward"] == 0.45 and math.isnan(second["kl"])
    assert second["val-core/math/reward/mean@1"] == 0.2  # a second data source kept under its own name
    assert third == {"step": 3, "reward": 0.375, "entropy": 0.58}
    # a line still being written when the file is read (a watch polls a running job) waits for its newline
    growing = parse_console_log("step:1 - critic/score/mean:0.125\nstep:2 - critic/score/mean:0.2")
    assert [h["step"] for h in growing.history] == [1]


def test_a_file_that_is_no_log_is_one_line_naming_it(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Training started\n{'model': 'qwen', 'lr': 1e-5}\nloss went down\n")
    with pytest.raises(InputError, match="notes.txt is not a log this reader knows") as error:
        read_run_log(path)
    assert "\n" not in str(error.value)
    path.write_text("{'loss': nan, 'reward': 0.1}\n")
    with pytest.raises(InputError, match="'loss' is NaN or infinite at step 1"):
        read_run_log(path)
    assert read_run_log(path, allow_non_finite=True).attrs["non_finite"] == {"loss": [1.0]}
