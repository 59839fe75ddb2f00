"""The benchmark scripts' argument handling (their measurements need an idle machine and are not timed here)."""

import importlib.util
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


def test_the_avx512_probe_draws_philox_h_s_normals_bit_for_bit(tmp_path):
    """benchmarks/philox_simd_probe.c (a measurement for a future AVX-512 philox.h): its sixteen-lane normals are
    philox.h's, bit for bit (the probe exits non-zero when any differs); on a CPU with AVX-512 and a C compiler."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if cc is None or " avx512f" not in flags:
        pytest.skip("needs a C compiler and a CPU with AVX-512F")
    root = Path(__file__).resolve().parents[1]
    exe = tmp_path / "probe"
    subprocess.run([cc, "-O3", "-march=native", "-ffast-math", "-I", str(root / "src/softmax_icl/kernels"),
                    str(root / "benchmarks/philox_simd_probe.c"), "-o", str(exe), "-lm"], check=True, timeout=120)
    out = subprocess.run([str(exe), "4096"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "AVX-512 0, AVX-512 x2 0, of 4096" in out.stdout
