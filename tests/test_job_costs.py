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


def test_patterns_match_fill_and_respect_constraints():
    from pgrpo.grpo.job_costs import fill_pattern, match_pattern

    pattern = "results/benchmarks/kref_sweep/{arm,sgd|adam}/{run,baseline|lr[0-9.e+-]+_kref\\d+}.tsv"
    assert match_pattern(pattern, "results/benchmarks/kref_sweep/sgd/lr0.6_kref64.tsv") == {
        "arm": "sgd", "run": "lr0.6_kref64"}
    assert match_pattern(pattern, "results/benchmarks/kref_sweep/sgd/grid.tsv") is None  # run's constraint
    assert match_pattern(pattern, "results/benchmarks/kref_sweep/rmsprop/baseline.tsv") is None
    assert match_pattern("a/{x}/{x}.tsv", "a/1/1.tsv") == {"x": "1"}
    assert match_pattern("a/{x}/{x}.tsv", "a/1/2.tsv") is None  # a wildcard named twice is the same text
    assert fill_pattern("results/kref_sweep/{arm,sgd|adam}/{run}/log.csv", {"arm": "sgd", "run": "r"}) == \
        "results/kref_sweep/sgd/r/log.csv"
    assert fill_pattern("results/kref_sweep/{arm}/grid.json", {"run": "r"}) is None


def _checkpoint_dag():
    # model (5 s) -> baseline (20 s) -> grid (1 s, a checkpoint) -> [cells the checkpoint adds] -> sweep (2 s)
    from pgrpo.grpo.job_costs import RulePattern

    jobs = [Job("model", "model", 5.0, (), ("m/model",)),
            Job("kref/sgd/baseline", "kref_train", 20.0, ("m/model",), ("k/sgd/baseline/log.csv",)),
            Job("grid:k/sgd/grid.json", "kref_grid", 1.0, ("k/sgd/baseline/log.csv",), ("k/sgd/grid.json",)),
            Job("sweep", "kref_sweep", 2.0, ("k/sgd/grid.json",), ("k/table.md",))]
    rules = [RulePattern("model", "b/model.tsv", ("m/model",)),
             RulePattern("kref_train", "b/kref/{arm}/{run}.tsv", ("k/{arm}/{run}/log.csv",)),
             RulePattern("kref_grid", None, ("k/{arm}/grid.json",), checkpoint=True),
             RulePattern("kref_sweep", "b/sweep.tsv", ("k/table.md",))]
    return jobs, rules


def test_jobs_a_checkpoint_adds_join_the_dag_between_it_and_its_readers():
    from pgrpo.grpo.job_costs import jobs_added_by_checkpoints

    jobs, rules = _checkpoint_dag()
    files = {"b/kref/sgd/lr0.6_kref4.tsv": 30.0, "b/kref/sgd/lr0.6_kref64.tsv": 50.0,
             "b/kref/adam/lr1_kref4.tsv": 7.0,  # no adam grid in this DAG: not of it
             "b/other/thing.tsv": 3.0}  # no rule's pattern
    widened, added = jobs_added_by_checkpoints(jobs, rules, files, name_of=lambda p: p[2:-4])
    assert sorted(j.name for j in added) == ["kref/sgd/lr0.6_kref4", "kref/sgd/lr0.6_kref64"]
    cell = next(j for j in added if j.name.endswith("kref64"))
    assert cell.inputs == ("k/sgd/grid.json",) and cell.outputs == ("k/sgd/lr0.6_kref64/log.csv",)
    sweep = next(j for j in widened if j.name == "sweep")
    assert set(sweep.inputs) == {"k/sgd/grid.json", "k/sgd/lr0.6_kref4/log.csv", "k/sgd/lr0.6_kref64/log.csv"}
    path, seconds = critical_path(widened + added)
    # by hand: 5 + 20 + 1 + max(30, 50) + 2
    assert path == ("model", "kref/sgd/baseline", "grid:k/sgd/grid.json", "kref/sgd/lr0.6_kref64", "sweep")
    assert seconds == 78.0
    table = cost_table(widened + added)
    assert table.total_seconds == 5 + 20 + 1 + 30 + 50 + 2


def test_a_cell_older_than_its_checkpoint_output_is_not_of_this_dag():
    from pgrpo.grpo.job_costs import jobs_added_by_checkpoints

    jobs, rules = _checkpoint_dag()
    files = {"b/kref/sgd/old.tsv": 30.0, "b/kref/sgd/new.tsv": 50.0}
    written = {"b/kref/sgd/old.tsv": 100.0, "k/sgd/grid.json": 200.0, "b/kref/sgd/new.tsv": 300.0}
    _, added = jobs_added_by_checkpoints(jobs, rules, files, written)
    assert [j.name for j in added] == ["b/kref/sgd/new.tsv"]


def test_the_stage_counts_checkpoint_added_jobs_from_their_benchmark_files(tmp_path):
    import os

    bench, out = tmp_path / "bench", tmp_path / "out"
    (out / "sgd").mkdir(parents=True)
    (out / "sgd" / "grid.json").write_text("{}")
    os.utime(out / "sgd" / "grid.json", (1000.0, 1000.0))
    _bench(bench / "kref" / "sgd" / "baseline.tsv", 20.0)
    _bench(bench / "kref" / "sgd" / "lr0.6_kref64.tsv", 50.0)
    os.utime(bench / "kref" / "sgd" / "lr0.6_kref64.tsv", (1100.0, 1100.0))
    graph = tmp_path / "graph.json"
    write_job_graph([
        {"rule": "kref_train", "benchmark": str(bench / "kref" / "sgd" / "baseline.tsv"), "inputs": [],
         "outputs": [str(out / "sgd" / "baseline" / "log.csv")], "needrun": True},
        {"rule": "kref_grid", "benchmark": None, "inputs": [str(out / "sgd" / "baseline" / "log.csv")],
         "outputs": [str(out / "sgd" / "grid.json")], "needrun": True},
        {"rule": "kref_sweep", "benchmark": None, "inputs": [str(out / "sgd" / "grid.json")],
         "outputs": [str(out / "table.md")], "needrun": True},
    ], str(graph), cores=2, started_at=900.0, rules=[
        {"rule": "kref_train", "benchmark": str(bench) + "/kref/{arm}/{run}.tsv",
         "outputs": [str(out) + "/{arm}/{run}/log.csv"]},
        {"rule": "kref_grid", "benchmark": None, "outputs": [str(out) + "/{arm}/grid.json"], "checkpoint": True},
        {"rule": "kref_sweep", "benchmark": None, "outputs": [str(out / "table.md")]},
    ])
    summary = tmp_path / "s.json"
    table = run_job_costs(str(graph), str(bench), str(tmp_path / "m.md"), str(tmp_path / "c.csv"),
                          out_json=str(summary), now=1200.0)
    assert table.total_seconds == 70.0  # the baseline and the cell the checkpoint added
    assert table.critical_path == ("kref/sgd/baseline", str(out / "sgd" / "grid.json").join(["kref_grid:", ""]),
                                   "kref/sgd/lr0.6_kref64", str(out / "table.md").join(["kref_sweep:", ""]))
    assert json.loads(summary.read_text())["jobs_run"] == 2  # the cell was written after the run started
