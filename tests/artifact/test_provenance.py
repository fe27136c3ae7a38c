"""Tests for paperlib.artifact.provenance: keys, atomic writes, result cache."""

import json
import os

import numpy as np
import pytest

from paperlib.artifact import provenance as pv


def test_key_stable_and_order_independent():
    a = {"N": 60000, "q": 0.004, "sigma": 1.1, "mechanism": "easgm"}
    b = dict(reversed(list(a.items())))
    k = pv.result_key(a)
    assert k == pv.result_key(b)
    assert len(k) == 16 and all(c in "0123456789abcdef" for c in k)
    # fixed value: the key must not change across runs/versions of this module
    assert pv.result_key({"a": 1}) == pv.result_key({"a": np.int64(1)})
    import hashlib

    assert pv.result_key({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()[:16]


def test_key_changes_with_params():
    assert pv.result_key({"n": 1}) != pv.result_key({"n": 2})
    assert pv.result_key({"n": 1}) != pv.result_key({"n": 1.0})


def test_key_rejects_bad_params():
    with pytest.raises(ValueError):
        pv.result_key({"x": float("nan")})
    with pytest.raises(TypeError):
        pv.result_key({"x": object()})
    with pytest.raises(TypeError):
        pv.result_key([1, 2])


def test_write_json_atomic(tmp_path):
    p = tmp_path / "sub" / "x.json"
    pv.write_json_atomic(p, {"a": np.arange(3), "b": np.float64(0.5)})
    assert json.loads(p.read_text()) == {"a": [0, 1, 2], "b": 0.5}
    # a failing write leaves the old file intact and no temp files behind
    with pytest.raises(TypeError):
        pv.write_json_atomic(p, {"a": object()})
    assert json.loads(p.read_text()) == {"a": [0, 1, 2], "b": 0.5}
    assert os.listdir(p.parent) == ["x.json"]


def test_write_json_atomic_no_partial_file_on_interrupt(tmp_path, monkeypatch):
    p = tmp_path / "y.json"
    pv.write_json_atomic(p, {"v": 1})

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pv.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        pv.write_json_atomic(p, {"v": 2})
    assert json.loads(p.read_text()) == {"v": 1}
    assert os.listdir(tmp_path) == ["y.json"]


def test_save_and_load_result(results):
    params = {"N": 1000, "q": 0.01, "sigma": 1.0}
    path = pv.save_result("demo", params, {"beta": np.linspace(0, 1, 3)}, mode="quick", seed=0, wall_time=1.5)
    assert path == results / "demo.json"
    rec = json.loads(path.read_text())
    assert rec["key"] == pv.result_key(params)
    prov = rec["provenance"]
    for k in ("git_commit", "created_utc", "python", "numpy", "scipy", "torch", "platform",
              "parameters", "seed", "mode", "wall_time_s"):
        assert k in prov
    assert prov["mode"] == "quick" and prov["seed"] == 0 and prov["wall_time_s"] == 1.5
    assert prov["parameters"] == params
    import platform

    assert platform.node() not in prov["platform"] or not platform.node()
    assert pv.load_result("demo", params) == {"beta": [0.0, 0.5, 1.0]}


def test_cache_miss(results):
    params = {"N": 1000, "q": 0.01}
    assert pv.load_result("nothing", params) is None
    pv.save_result("demo", params, [1, 2], mode="quick", seed=0, wall_time=0.0)
    assert pv.load_result("demo", {"N": 1000, "q": 0.02}) is None
    assert pv.load_result("demo", {**params, "extra": 1}) is None
    assert pv.load_result("demo", params) == [1, 2]
    (results / "demo.json").write_text("{not json")
    assert pv.load_result("demo", params) is None


def test_bad_name(results):
    with pytest.raises(ValueError):
        pv.save_result("../x", {}, 1, mode="quick", seed=0, wall_time=0)
    with pytest.raises(ValueError):
        pv.load_result("", {})


def test_result_made_by_other_code_is_a_miss(results, monkeypatch):
    from paperlib.artifact import deps

    pv.save_result("fp", {"n": 1}, {"v": 1}, mode="quick", seed=0, wall_time=0.1)
    rec = json.loads((results / "fp.json").read_text())
    assert rec["code"] == deps.code_fingerprint()
    assert pv.load_result("fp", {"n": 1}) == {"v": 1}
    monkeypatch.setattr(deps, "code_fingerprint", lambda files=None: "0" * 16)
    assert pv.load_result("fp", {"n": 1}) is None  # a changed paperlib file or package version
