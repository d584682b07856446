"""The main job's per-job cost table (issue 24): job-seconds, shares and the critical path, on hand-built DAGs
whose answers are worked out by hand in each test."""

from __future__ import annotations

import csv
import json

import pytest
from pgrpo.errors import InputError
from pgrpo.grpo.job_costs import Job, cost_table, critical_path, dependencies
from pgrpo.stages.job_costs import benchmark_seconds, run_job_costs, write_job_graph


def _diamond() -> list[Job]:
    # a -> b -> d and a -> c -> d; e stands alone; all reads d's output
    return [
        Job("a", "prep", 3.0, (), ("x.txt",)),
        Job("b", "short", 5.0, ("x.txt",), ("b.txt",)),
        Job("c", "long", 10.0, ("x.txt",), ("c.txt",)),
        Job("d", "join", 1.0, ("b.txt", "c.txt"), ("d.txt",)),
        Job("e", "short", 4.0, ("data/raw.csv",), ("e.txt",)),
        Job("all", "all", None, ("d.txt", "e.txt"), ()),
    ]


def test_dependencies_follow_the_files():
    deps = dependencies(_diamond())
    assert deps == {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}, "e": set(), "all": {"d", "e"}}


def test_critical_path_is_the_heaviest_chain():
    path, seconds = critical_path(_diamond())
    assert path == ("a", "c", "d", "all")  # 3 + 10 + 1 against 3 + 5 + 1 and 4
    assert seconds == 14.0


def test_table_totals_shares_and_lower_bound():
    table = cost_table(_diamond(), exclude_rules=("all",))
    assert table.total_seconds == 23.0
    assert [j.name for j in table.jobs] == ["c", "b", "e", "a", "d"]
    assert table.jobs[0].share == pytest.approx(10 / 23)
    assert {j.name for j in table.jobs if j.on_critical_path} == {"a", "c", "d"}
    assert table.critical_path == ("a", "c", "d")
    short = next(r for r in table.rules if r.rule == "short")
    assert (short.jobs, short.seconds, short.max_seconds) == (2, 9.0, 5.0)
    assert short.share == pytest.approx(9 / 23)
    assert table.wall_lower_bound(1) == 23.0
    assert table.wall_lower_bound(2) == 14.0  # the critical path beats 23 / 2
    assert table.wall_lower_bound(4) == 14.0
    with pytest.raises(ValueError):
        table.wall_lower_bound(0)


def test_a_file_inside_a_directory_output_is_a_dependency():
    jobs = [Job("figs", "draw", 2.0, (), ("results/figures",)),
            Job("page", "page", 1.0, ("results/figures/one.png",), ("page.md",)),
            Job("other", "draw", 7.0, ("results/figures_other.png",), ())]
    assert dependencies(jobs)["page"] == {"figs"}
    assert dependencies(jobs)["other"] == set()  # a sibling name is not inside the directory
    assert critical_path(jobs) == (("other",), 7.0)


def test_a_cycle_and_a_repeated_name_raise():
    with pytest.raises(ValueError, match="cycle"):
        critical_path([Job("p", "r", 1.0, ("q.txt",), ("p.txt",)), Job("q", "r", 1.0, ("p.txt",), ("q.txt",))])
    with pytest.raises(ValueError, match="share the name"):
        dependencies([Job("p", "r", 1.0), Job("p", "r", 2.0)])


def _bench(path, *seconds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("s\th:m:s\tmax_rss\n" + "".join(f"{s}\t0:00:01\t10\n" for s in seconds))


def test_stage_reads_the_graph_and_the_benchmark_files(tmp_path):
    bench = tmp_path / "benchmarks"
    _bench(bench / "train" / "tiny" / "G4" / "seed0.tsv", 30.0, 40.0)  # repeats: the mean, 35
    _bench(bench / "build_tiny_model" / "tiny.tsv", 5.0)
    _bench(bench / "job_costs.tsv", 99.0)  # the table's own rule is not counted
    graph = tmp_path / "graph.json"
    write_job_graph([
        {"rule": "build_tiny_model", "benchmark": str(bench / "build_tiny_model" / "tiny.tsv"), "inputs": [],
         "outputs": ["models/tiny"]},
        {"rule": "train", "benchmark": str(bench / "train" / "tiny" / "G4" / "seed0.tsv"),
         "inputs": ["models/tiny/config.json"], "outputs": ["runs/tiny/log.csv"]},
        {"rule": "evaluate", "benchmark": str(bench / "evaluate" / "tiny.tsv"), "inputs": ["runs/tiny/log.csv"],
         "outputs": ["eval.json"]},  # no benchmark file: not measured
        {"rule": "job_costs", "benchmark": str(bench / "job_costs.tsv"), "inputs": ["eval.json"],
         "outputs": ["costs.md"]},
        {"rule": "all", "benchmark": None, "inputs": ["costs.md"], "outputs": []},
    ], str(graph), cores=2, started_at=1000.0)
    md, out_csv, summary = tmp_path / "costs.md", tmp_path / "costs.csv", tmp_path / "costs.json"
    table = run_job_costs(str(graph), str(bench), str(md), str(out_csv), out_json=str(summary), now=1000.0 + 90.0)
    assert table.total_seconds == 40.0
    assert table.critical_path == ("build_tiny_model/tiny", "train/tiny/G4/seed0", "evaluate/tiny")
    assert table.critical_path_seconds == 40.0 + 99.0  # the uncounted own job still closes the chain
    assert table.unmeasured == ("evaluate/tiny",)
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["job"], float(r["seconds"]), float(r["share"])) for r in rows] == [
        ("train/tiny/G4/seed0", 35.0, 35 / 40), ("build_tiny_model/tiny", 5.0, 5 / 40)]
    text = md.read_text()
    assert "**40 s** over 2 jobs" in text and "not measured (no benchmark file): evaluate/tiny" in text
    assert "elapsed: **90 s** (1.5 min) of wall-clock on 2 cores" in text  # the run's own start and cores
    assert "that run executed 2 of the 2 jobs" in text  # needrun defaults to True: train, build (+ evaluate unmeasured)
    totals = json.loads(summary.read_text())
    assert (totals["jobs"], totals["job_seconds"], totals["critical_path_seconds"], totals["cores"],
            totals["elapsed_seconds"]) == (2, 40.0, 139.0, 2, 90.0)
    assert totals["wall_lower_bound_seconds"] == max(139.0, 40.0 / 2)
    assert [(r["rule"], r["seconds"]) for r in totals["rules"]] == [("train", 35.0), ("build_tiny_model", 5.0)]


def test_bad_inputs_name_the_file(tmp_path):
    bad = tmp_path / "x.tsv"
    bad.write_text("seconds\n1\n")
    with pytest.raises(InputError, match="column 's'"):
        benchmark_seconds(bad)
    assert benchmark_seconds(tmp_path / "missing.tsv") is None
    graph = tmp_path / "g.json"
    graph.write_text('{"jobs": [{"rule": "r"}]}')
    with pytest.raises(InputError, match="inputs"):
        run_job_costs(str(graph), str(tmp_path), str(tmp_path / "m.md"), str(tmp_path / "c.csv"))
    with pytest.raises(InputError):
        run_job_costs(str(tmp_path / "none.json"), str(tmp_path), str(tmp_path / "m.md"), str(tmp_path / "c.csv"))


def test_the_cores_of_a_run_without_a_total_are_not_recorded():
    from pgrpo.stages.job_costs import workflow_cores

    class Local:
        cores = 2

    class Cluster:  # snakemake's executor plugins define no total: reading it raises
        @property
        def cores(self):
            raise RuntimeError("Workflow requires a total number of cores to be defined")

    assert workflow_cores(Local()) == 2 and workflow_cores(Cluster()) is None


def test_the_elapsed_time_says_how_many_jobs_the_run_executed(tmp_path):
    bench = tmp_path / "benchmarks"
    _bench(bench / "a.tsv", 10.0)
    _bench(bench / "b.tsv", 20.0)
    graph = tmp_path / "graph.json"
    write_job_graph([  # a partial re-run: a was done before, this run executed b alone
        {"rule": "a", "benchmark": str(bench / "a.tsv"), "inputs": [], "outputs": ["x"], "needrun": False},
        {"rule": "b", "benchmark": str(bench / "b.tsv"), "inputs": ["x"], "outputs": ["y"], "needrun": True},
    ], str(graph), cores=2, started_at=0.0)
    md, summary = tmp_path / "c.md", tmp_path / "c.json"
    run_job_costs(str(graph), str(bench), str(md), str(tmp_path / "c.csv"), out_json=str(summary), now=25.0)
    assert "that run executed 1 of the 2 jobs" in md.read_text()
    assert json.loads(summary.read_text())["jobs_run"] == 1
