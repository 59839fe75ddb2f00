"""The benchmark scripts' argument handling (their measurements need an idle machine and are not timed here)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module               # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    return module


def test_roofline_refuses_cuda_without_a_gpu_before_any_measurement(monkeypatch, capsys):
    roofline = _load("roofline")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(roofline, "build_fma", lambda *a: pytest.fail("measured before refusing"))
    monkeypatch.setattr(sys, "argv", ["roofline.py", "--device", "cuda"])
    with pytest.raises(SystemExit) as exit_:
        roofline.main()
    assert exit_.value.code == 2
    assert "--device cuda" in capsys.readouterr().err


def test_roofline_refuses_the_eager_gpu_variant_on_the_cpu_before_any_measurement(monkeypatch, capsys):
    roofline = _load("roofline")
    monkeypatch.setattr(roofline, "build_fma", lambda *a: pytest.fail("measured before refusing"))
    monkeypatch.setattr(sys, "argv", ["roofline.py", "--backends", "torch-eager"])
    with pytest.raises(SystemExit) as exit_:
        roofline.main()
    assert exit_.value.code == 2 and "--device cuda" in capsys.readouterr().err


def test_roofline_names_the_allowed_stages_of_an_unknown_one(monkeypatch, capsys):
    roofline = _load("roofline")
    monkeypatch.setattr(sys, "argv", ["roofline.py", "--stages", "train_nothing"])
    with pytest.raises(SystemExit):
        roofline.main()
    err = capsys.readouterr().err
    assert "train_nothing" in err and all(s.name in err for s in roofline.STAGES)


@pytest.mark.parametrize("argv", [["8", "200", "5"], ["8", "200", "5", "x"], ["8", "0", "5", "256"],
                                  ["--words", "5", "128"], ["--words", "5", "0", "8"], ["--words", "a", "1", "2"]])
def test_compile_probe_refuses_bad_shapes_before_any_measurement(monkeypatch, argv):
    probe = _load("compile_probe")
    for name in ("probe", "words_probe"):
        monkeypatch.setattr(probe, name, lambda *a: pytest.fail("measured before refusing"))
    with pytest.raises(SystemExit) as exit_:
        probe.main(argv)
    expected = "groups of three: rows tasks blocks" if argv[0] == "--words" else "groups of four: d n rows tasks"
    assert expected in str(exit_.value.code)



@pytest.mark.parametrize("extra, expected", [
    (["--stages", "train_nothing"], "unknown stage(s) ['train_nothing']"),
    (["--stages", "train_nothing"], "allowed: norm_scaling/train_t34_d8"),
    (["--steps", "2"], "--steps must be >= 3")])
def test_engine_ab_refuses_bad_arguments_before_building_anything(monkeypatch, capsys, extra, expected):
    ab = _load("engine_ab")
    monkeypatch.setattr(ab, "load", lambda *a: pytest.fail("built before refusing"))
    monkeypatch.setattr(ab, "load_cls", lambda *a: pytest.fail("built before refusing"))
    monkeypatch.setattr(sys, "argv", ["engine_ab.py", str(ROOT), str(ROOT), *extra])
    with pytest.raises(SystemExit) as exit_:
        ab.main()
    assert exit_.value.code == 2 and expected in capsys.readouterr().err


def test_engine_ab_names_a_tree_without_the_engine(monkeypatch, capsys, tmp_path):
    ab = _load("engine_ab")
    monkeypatch.setattr(ab, "load", lambda *a: pytest.fail("built before refusing"))
    monkeypatch.setattr(sys, "argv", ["engine_ab.py", str(ROOT), str(tmp_path)])
    with pytest.raises(SystemExit) as exit_:
        ab.main()
    assert exit_.value.code == 2 and f"{tmp_path}: no engine sources" in capsys.readouterr().err


def test_engine_ab_names_a_tree_without_paper_2s_engine(monkeypatch, capsys, tmp_path):
    ab = _load("engine_ab")
    engine = tmp_path / "src" / "softmax_icl" / "engine"
    engine.mkdir(parents=True)
    for name in ("regression.c", "philox.h"):
        (engine / name).write_text("")                  # paper 1's sources only
    monkeypatch.setattr(ab, "load", lambda *a: pytest.fail("built before refusing"))
    monkeypatch.setattr(ab, "load_cls", lambda *a: pytest.fail("built before refusing"))
    monkeypatch.setattr(sys, "argv", ["engine_ab.py", str(ROOT), str(tmp_path), "--stages", "train_readings_n200"])
    with pytest.raises(SystemExit) as exit_:
        ab.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "engine/classification.c" in err and f"{tmp_path}: no engine sources" in err


def test_engine_ab_times_paper_2s_step_and_one_engine_against_itself_differs_by_nothing():
    """Paper 2's stage, the same engine as A and B: both timed every step, the same bits."""
    ab = _load("engine_ab")
    from softmax_icl.engine import classification as native
    if not native.available():
        pytest.skip(native.backend())
    lib = ab.load_cls(ROOT)
    r = ab.measure_cls("classification_kernel_gd/train_readings_n200", {"A": lib, "B": lib}, steps=3, calls=1)
    assert r["A_s"] > 0 and r["B_s"] > 0 and r["max_rel_diff"] == 0.0


def test_roofline_fma_loop_runs_on_the_widest_vectors_the_cpu_has(tmp_path):
    """The machine's peak is measured on the vectors the engine uses (512 bits with AVX-512): a loop the compiler
    vectorised on 256-bit registers measured half the AVX-512 Xeon's peak."""
    roofline = _load("roofline")
    exe = roofline.build_fma(tmp_path)
    if exe is None:
        pytest.skip("no C compiler")
    rate, bits = subprocess.run([str(exe), "1", "1000"], capture_output=True, text=True, check=True).stdout.split()
    flags = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        flags = {f for line in cpuinfo.read_text().splitlines() if line.startswith("flags") for f in line.split()}
    expected = 512 if "avx512f" in flags else 256 if "avx" in flags else 128
    assert float(rate) > 0 and int(bits) == expected


class _Sweep:
    """The fields of a sweep the roofline's work models read."""

    def __init__(self, configs, **fields):
        self._configs = configs
        self.__dict__.update(fields)

    def configs(self):
        return self._configs


def _regression(*labels, n=50, d=3):
    configs = [dict(function_class=fc, L=L, sigma=s, n=n, seed=0) for fc, L, s in labels]
    return _Sweep(configs, param="M", d=d, k=1, batch_size=4, model="softmax", classes={fc for fc, _, _ in labels})


def test_roofline_counts_a_label_shared_by_configurations_once():
    """Configurations on the same task at the same L share its cosines (the engine computes them once): the floor
    counts them once, and a second L adds exactly one more row of cosines."""
    roofline = _load("roofline")
    same_L = roofline.regression_work(_regression(("cosine", 2.0, 0.1), ("cosine_centered", 2.0, 1.0))).flop
    two_L = roofline.regression_work(_regression(("cosine", 2.0, 0.1), ("cosine_centered", 3.0, 1.0))).flop
    assert two_L - same_L == 4 * 51 * roofline.LABEL_SHARED["cosine"]
    one = roofline.regression_work(_regression(("relu", 2.0, 0.1))).flop
    two = roofline.regression_work(_regression(("relu", 2.0, 0.1), ("relu", 4.0, 0.1))).flop
    assert two - one < one                                                           # the second shares the task


def test_roofline_balanced_scan_is_at_least_a_candidate_per_point_and_at_most_the_pool():
    roofline = _load("roofline")
    assert roofline.balanced_scan(30, 1, 4, trials=64) == 31.0                      # one class: every candidate fits
    m = roofline.balanced_scan(30, 4, 4, trials=64)
    assert 31 < m <= 16 * 31
    assert roofline.balanced_scan(30, 4, 4, trials=64) == m                         # the same draws every call


def test_roofline_counts_the_class_balanced_candidates_it_scans(monkeypatch):
    """The class-balanced reading's floor grows with the candidates scanned, not the pool's size."""
    roofline = _load("roofline")
    configs = [dict(model="softmax", reading="balanced", P=1, tau=0.0, k=0, C=3, d=4, n=20, seed=0)]
    sw = _Sweep(configs, n=(20,), batch_size=2, dims=(20, 3, 1, 4))
    monkeypatch.setattr(roofline, "balanced_scan", lambda n, C, d: 21.0)
    low = roofline.classification_work(sw).flop
    monkeypatch.setattr(roofline, "balanced_scan", lambda n, C, d: 42.0)
    high = roofline.classification_work(sw).flop
    assert high - low == 2 * 21 * (4 * roofline.NORMAL + 3 * 4 + 4 + 3 * (2 * 4 + 1))


def test_roofline_names_the_processor_and_the_code_it_measured():
    """A roofline table holds for one machine and one commit: both are printed and written with it."""
    roofline = _load("roofline")
    cpu = roofline.processor("cpu")
    assert cpu and cpu != "unknown CPU"
    if Path("/proc/cpuinfo").exists() and "cpu family" in Path("/proc/cpuinfo").read_text():
        assert "family" in cpu and "model" in cpu


def test_the_results_page_is_what_its_sources_give():
    """benchmarks/RESULTS.md is written by benchmarks/results_page.py from the committed measurements and records."""
    page = _load("results_page")
    assert page.PAGE.read_text() == page.page(), "benchmarks/RESULTS.md is stale: run python benchmarks/results_page.py"


def test_the_results_page_keeps_one_roofline_per_device_and_refuses_two(tmp_path):
    page = _load("results_page")
    assert page.device_slug("cuda", "NVIDIA H200") == "cuda_nvidia_h200"
    assert page.device_slug("cpu", "AMD EPYC (family 25, model 17)") == "cpu_amd_epyc_family_25_model_17"
    stages = {"s/train": {"flop": 2e9, "bytes": 1e3, "floor_s": 0.01,
                          "by_backend": {"auto": {"measured_s": 0.025, "ratio": 2.5}}}}
    for name, proc in (("roofline_cuda_x.json", "X"), ("roofline_cpu_y.json", "Y")):
        (tmp_path / name).write_text(json.dumps({"machine": {"device": name.split("_")[1], "processor": proc,
                                                             "threads": 2, "flop_per_s": 2e11, "bytes_per_s": 2e10,
                                                             "flop_source": "FMA loop"}, "stages": stages}))
    files = page.roofline_files(tmp_path)
    assert [p.name for p, _ in files] == ["roofline_cpu_y.json", "roofline_cuda_x.json"]      # CPUs first
    text = "\n".join(page.roofline_section(files))
    assert "### Y (cpu, 2 threads)" in text and "| s/train | 2.00 | 10.0 | 25.0 | 2.50 |" in text
    (tmp_path / "roofline_cpu_y_again.json").write_text((tmp_path / "roofline_cpu_y.json").read_text())
    with pytest.raises(SystemExit, match="two roofline measurements of Y"):
        page.roofline_files(tmp_path)
