"""tools/paper_stages.py: a stage trained in parts (by seed) and assembled is the stage trained in one program."""

import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from softmax_icl.book.cache import cache_key, cached
from softmax_icl.classification import models as cmodels
from softmax_icl.training import Sweep, train_sweep

TOOL = Path(__file__).resolve().parents[1] / "tools" / "paper_stages.py"
spec = importlib.util.spec_from_file_location("paper_stages", TOOL)
ps = importlib.util.module_from_spec(spec)
sys.modules["paper_stages"] = ps
spec.loader.exec_module(ps)

SWEEP = Sweep(model="softmax", classes=("relu",), L=(0.5, 3.0), sigma=(0.1,), n=(8,), seeds=3, d=3,
              steps=30, batch_size=16, lr=0.05, log_every=10)
CLS = cmodels.ClsSweep(models=("softmax", "linear"), n=(10,), shapes=((3, 2),), seeds=3, steps=30, batch_size=16,
                       lr=0.05, log_every=10)


def _train(sw):
    return cmodels.train_cls_sweep if isinstance(sw, cmodels.ClsSweep) else train_sweep


@pytest.mark.parametrize("sw", [SWEEP, CLS], ids=["regression", "classification"])
@pytest.mark.parametrize("p", [2, 3])
def test_parts_assemble_into_the_whole_sweep(sw, p, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path))
    train = _train(sw)
    full = train(sw, "cpu", progress=False)
    assert sorted(c["seed"] for i in range(p) for c in ps.part_configs(sw, i, p)) == sorted(
        c["seed"] for c in sw.configs())
    key = cache_key("fig-train_x", sw.to_dict(), "cpu")
    msgs = []
    for i in range(p):
        ps.train_part(sw, lambda s, d, **kw: train(s, d, progress=False, **kw), "cpu", key, i, p, desc="t")
        msgs.append(ps.merge_stage(sw, key, "train_x", p))
    assert all("not yet trained" in m for m in msgs[:-1]) and "assembled from" in msgs[-1]
    merged = pickle.loads((tmp_path / f"{key}.pkl").read_bytes())
    # the notebook's cache reads the assembled entry under the stage's key, and says it came from parts
    info = {}
    again, hit = cached("fig-train_x", sw.to_dict(), "cpu", lambda: pytest.fail("recomputed"), info=info)
    assert hit and info["parts"] == p and again.configs == full.configs
    assert merged.configs == full.configs and merged.timings["parts"] == p
    hist = ("M_history",) if hasattr(full, "M_history") else ("A_history", "WV_history")
    for name in (*hist, "loss_history"):
        np.testing.assert_allclose(getattr(merged, name), getattr(full, name), rtol=2e-4, atol=2e-6)
    finals = full.final_state if hasattr(full, "final_state") else full.final
    mfinals = merged.final_state if hasattr(merged, "final_state") else merged.final
    assert finals.keys() == mfinals.keys()
    for k in finals:
        np.testing.assert_allclose(mfinals[k], finals[k], rtol=2e-4, atol=2e-6)
    # the weights moved, and seeds differ: the comparison could fail
    h = getattr(full, hist[0])
    assert np.abs(h[-1] - h[0]).max() > 1e-3
    assert not np.allclose(h[-1, 0], h[-1, 1])                  # configurations 0 and 1: seeds 0 and 1


def test_parts_that_are_not_a_partition_are_refused():
    full = train_sweep(SWEEP, "cpu", progress=False)
    part = train_sweep(SWEEP, "cpu", configs=ps.part_configs(SWEEP, 0, 2), progress=False)
    with pytest.raises(ValueError, match="not a partition"):
        ps.merge_parts(SWEEP, [part, part])
    with pytest.raises(ValueError, match="not a partition"):
        ps.merge_parts(SWEEP, [full, part])


@pytest.mark.parametrize("i, p, match", [(0, 4, "parts=4"), (0, 0, "parts=0"), (2, 2, "part=2")])
def test_bad_part_numbers_name_the_allowed_values(i, p, match):
    with pytest.raises(ValueError, match=match):
        ps.part_configs(SWEEP, i, p)
