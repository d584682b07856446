"""Table 1 as in the paper (Section 5.7) from hand-made evaluation JSONs whose numbers are known: the HTML view's
colours (green above base, bold green the model's best, red below), column and benchmark order, the cell summary,
and the pass@k curve (k = 1..n) from per-problem correct counts against a brute-force count of k-subsets."""

from __future__ import annotations

import itertools
import json
import math
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from pgrpo.errors import InputError
from pgrpo.stages.evaluate import passk_curves_frame, run_passk_curves, run_table1


def write_eval(directory: Path, model: str, variant: str, benchmark: str, p1: float, p5: float,
               n_problems: int = 100, counts: list[int] | None = None, num_samples: int = 5) -> str:
    path = directory / f"{model}_{variant}_{benchmark}.json"
    record = {"model": model, "variant": variant, "benchmark": benchmark, "n_problems": n_problems,
              "num_samples": num_samples, "pass@1": p1, "pass@5": p5}
    if counts is not None:
        record["correct_counts"] = counts
    path.write_text(json.dumps(record))
    return str(path)


@pytest.fixture()
def evals(tmp_path):
    """Two benchmarks, given in non-alphabetical order ("zeta" first); model m1 with base, G=4 and G=16 (2 seeds)."""
    d = tmp_path
    paths = []
    for bench, shift in (("zeta", 0.0), ("alpha", 0.10)):
        paths += [
            write_eval(d, "m1", "base", bench, 0.20 + shift, 0.40),
            write_eval(d, "m1", "G4_seed42", bench, 0.30 + shift, 0.50),
            write_eval(d, "m1", "G4_seed3407", bench, 0.34 + shift, 0.46),
            write_eval(d, "m1", "G16_seed42", bench, 0.10 + shift, 0.40),
            write_eval(d, "m1", "G16_seed3407", bench, 0.14 + shift, 0.44),
        ]
    return d, paths


class Cells(HTMLParser):
    """The text and style of every <td>, and every <th> with its colspan."""

    def __init__(self):
        super().__init__()
        self.tds, self.ths, self._open = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag in ("td", "th"):
            self._open = (tag, dict(attrs), [])

    def handle_data(self, data):
        if self._open:
            self._open[2].append(data)

    def handle_endtag(self, tag):
        if self._open and tag == self._open[0]:
            kind, attrs, text = self._open
            (self.tds if kind == "td" else self.ths).append(("".join(text), attrs))
            self._open = None


def test_table1_html_colours_order_and_summary(evals):
    directory, paths = evals
    out = {k: str(directory / f"t.{k}") for k in ("csv", "md", "tex", "html")}
    summary_csv = str(directory / "summary.csv")
    run_table1(paths, out["csv"], out["md"], out["tex"], out_html=out["html"], out_summary_csv=summary_csv)

    page = Path(out["html"]).read_text()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    cells = Cells()
    cells.feed(page)
    headers = [text for text, _ in cells.ths]
    assert headers[:2] == ["", "m1"] and cells.ths[1][1]["colspan"] == "3"  # the model's group spans its 3 columns
    assert headers[2:] == ["Benchmark", "Metric", "Base", "G=16", "G=4"]  # G descending, as the paper
    rows = [cells.tds[i:i + 5] for i in range(0, len(cells.tds) - 1, 5)]  # the last <td> is the note
    assert [r[0][0] for r in rows] == ["zeta (100)", "", "alpha (100)", ""]  # the input's order, not sorted
    by_text = {(r_i, c_i): (text, attrs["style"]) for r_i, r in enumerate(rows) for c_i, (text, attrs) in enumerate(r)}
    sd = 100 * 0.04 / math.sqrt(2)  # two seeds 4 points apart
    # zeta pass@1: base 20; G=16 12 (below: red); G=4 32 (the best, above: bold green)
    assert by_text[(0, 2)][0] == "20.00" and "color" not in by_text[(0, 2)][1]
    assert by_text[(0, 3)][0] == f"12.00 ± {sd:.2f}" and "#cf222e" in by_text[(0, 3)][1]
    assert by_text[(0, 4)][0] == f"32.00 ± {sd:.2f}"
    assert "#1a7f37" in by_text[(0, 4)][1] and "font-weight:bold" in by_text[(0, 4)][1]
    # zeta pass@5: base 40; G=16 42 (above, not best: green, not bold); G=4 48 (bold green)
    assert "#1a7f37" in by_text[(1, 3)][1] and "bold" not in by_text[(1, 3)][1]
    assert "bold" in by_text[(1, 4)][1]
    # alpha pass@1: 30 | 22 | 42
    assert [by_text[(2, c)][0].split(" ")[0] for c in (2, 3, 4)] == ["30.00", "22.00", "42.00"]
    assert "bold green" in cells.tds[-1][0]  # the note explains the colours

    summary = pd.read_csv(summary_csv)
    row = summary[(summary["benchmark"] == "zeta") & (summary["metric"] == "pass@1") & (summary["column"] == "G=16")]
    assert row["mean"].item() == pytest.approx(12.0) and row["sd"].item() == pytest.approx(sd)
    assert row["base"].item() == pytest.approx(20.0) and row["delta"].item() == pytest.approx(-8.0)
    assert row["n"].item() == 2 and row["mark"].item() == "worse"
    marks = summary.set_index(["benchmark", "metric", "column"])["mark"]
    assert marks[("zeta", "pass@1", "G=4")] == "best" and marks[("zeta", "pass@5", "G=16")] == "better"
    assert marks[("zeta", "pass@1", "Base")] == "base"
    assert list(dict.fromkeys(summary["benchmark"])) == ["zeta", "alpha"]


def subset_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (c of them correct) holding a correct one, by enumeration."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


def test_passk_curve_from_counts_matches_subset_enumeration(tmp_path):
    counts = {"base": [0, 1, 2, 6], "G4_seed1": [3, 3, 6, 0], "G4_seed2": [1, 5, 6, 2]}
    paths = [write_eval(tmp_path, "m", variant, "b", 0.0, 0.0, n_problems=4, counts=c, num_samples=6)
             for variant, c in counts.items()]
    out = tmp_path / "passk"
    frame = run_passk_curves(paths, str(out) + ".csv", str(out) + ".pdf", str(out) + ".png")
    assert (tmp_path / "passk.png").stat().st_size > 0 and (tmp_path / "passk.pdf").stat().st_size > 0
    written = pd.read_csv(str(out) + ".csv")
    assert len(written) == 3 * 6 and sorted(set(written["k"])) == [1, 2, 3, 4, 5, 6]
    for variant, c in counts.items():
        got = written[written["variant"] == variant].sort_values("k")["value"].tolist()
        expected = [sum(subset_pass_at_k(6, ci, k) for ci in c) / 4 for k in range(1, 7)]
        assert got == pytest.approx(expected, abs=1e-12)
    # k = 1 is the mean fraction correct; k = n the fraction of problems solved at least once
    base = written[written["variant"] == "base"].set_index("k")["value"]
    assert base[1] == pytest.approx(9 / 24) and base[6] == pytest.approx(3 / 4)
    assert set(frame["column"]) == {"Base", "G=4"}


def test_passk_curve_falls_back_to_the_samples_file(tmp_path):
    path = Path(write_eval(tmp_path, "m", "base", "b", 0.0, 0.0, n_problems=3, num_samples=2))
    path.with_suffix(".samples.jsonl").write_text("".join(json.dumps({"n_correct": c}) + "\n" for c in (0, 1, 2)))
    frame = passk_curves_frame([str(path)])
    assert frame.set_index("k")["value"].to_dict() == pytest.approx({1: 0.5, 2: 2 / 3})


def test_passk_curve_rejects_counts_that_do_not_fit(tmp_path):
    wrong_length = write_eval(tmp_path, "m", "base", "b", 0.0, 0.0, n_problems=3, counts=[1, 2], num_samples=2)
    with pytest.raises(InputError, match="2 correct counts for 3 problems"):
        passk_curves_frame([wrong_length])
    too_many = write_eval(tmp_path, "m", "base", "c", 0.0, 0.0, n_problems=1, counts=[3], num_samples=2)
    with pytest.raises(InputError, match="outside"):
        passk_curves_frame([too_many])
    no_counts = write_eval(tmp_path, "m", "base", "d", 0.0, 0.0, n_problems=1, num_samples=2)
    with pytest.raises(InputError, match="no correct_counts and no samples file"):
        passk_curves_frame([no_counts])
