"""What a real-implementation audit records about its inputs (``r["inputs"]``), and the
bundled points as its offline data source (a clone with an empty data folder)."""

import pytest

from paperlib.implementations import datasets as D
from paperlib.implementations import real_audit as RA
from paperlib.implementations.registry import BY_NAME

KW = dict(N=4, q=0.7, sigma=10.0, C=0.1, trials=40, seed=0, check_trials=10, progress=False)
KEYS = {"data", "data_detail", "code", "code_as_paper", "paper_code", "real_rounds", "rounds"}


class _Store:
    """A result store that records what is saved and answers later lookups from it."""

    def __init__(self):
        self.saved, self.asked = {}, []

    def key(self, params):
        from paperlib.artifact.provenance import result_key

        return result_key(params)

    def load(self, name, params):
        self.asked.append(params)
        return self.saved.get(name)

    def save(self, name, params, data, *, seed, wall_time):
        self.saved[name] = data


def test_bundled_points_offline_clone(tmp_path, monkeypatch):
    """PAPERLIB_DATA at an empty folder: resolve_dataset picks the bundle and the audit records it."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "empty"))
    name, root, source = D.resolve_dataset("mnist", KW["N"] + 1, 0, mode="quick")
    assert (name, root, source) == ("mnist", None, D.SOURCE_BUNDLED)
    store = _Store()
    r = RA.audit_implementation("dpsur", "cnn-mnist", "mnist", points="bundled", cache=store, **KW).to_json()
    inp = r["inputs"]
    # DPSUR's step here is paperlib's re-implementation: the lines of DPSUR's code it follows, as a source
    assert set(inp) == KEYS | {"code_lines"} and "algorithm/DPSUR.py:" in inp["code_lines"]
    assert inp["data"] == "bundled real points"
    _, _, info = D.load_bundled("mnist", 5, 0)
    assert inp["data_detail"] == ("MNIST train split, indices " + ", ".join(map(str, info["indices"]))
                                  + " (bundled, sha256 ok)")
    assert inp["real_rounds"] == 2 * KW["check_trials"] and inp["rounds"] == 2 * KW["trials"]
    assert inp["code_as_paper"] is False and "re-implementation" in inp["code"]
    assert "DPSUR" in inp["paper_code"]
    # the cache key holds the bundle file's checksum and the points' hash
    params = store.asked[0]
    assert params["data_root"] == f"bundled:mnist.npz:{info['sha256']}" and len(params["points_sha256"]) == 64
    assert r["points_sha256"] == params["points_sha256"]
    again = RA.audit_implementation("dpsur", "cnn-mnist", "mnist", points="bundled", cache=store, **KW).to_json()
    assert again["cached"] and again["inputs"] == inp
    assert not list((tmp_path / "empty").iterdir())  # nothing downloaded


def test_three_datasets_give_three_point_sets():
    shas = set()
    for name, model in (("mnist", "cnn-mnist"), ("fmnist", "cnn-mnist"), ("cifar10", "cnn-cifar10")):
        r = RA.audit_implementation("dpsur", model, name, points="bundled", **KW).to_json()
        assert r["inputs"]["data"] == D.SOURCE_BUNDLED and r["inputs"]["data_detail"].startswith(D.DATASET_TITLES[name])
        shas.add(r["points_sha256"])
    assert len(shas) == 3


def test_synthetic_only_by_name_and_labelled():
    r = RA.audit_implementation("dpsur", "cnn-mnist", "synthetic", **KW).to_json()
    assert r["inputs"]["data"] == "synthetic stand-in" and "not real data" in r["inputs"]["data_detail"]


def test_points_argument_is_checked():
    with pytest.raises(ValueError, match="^points must be"):
        RA.audit_implementation("dpsur", "cnn-mnist", "mnist", points="nowhere", **KW)


@pytest.mark.parametrize("impl,version,as_paper,word", [
    ("opacus-1.0.2", "1.0.2", True, "Opacus 1.0.2 DPOptimizer step (installed on demand"),
    ("opacus-0.15.0", "0.15.0", True, "Opacus 0.15.0 PrivacyEngine step"),
    ("opacus-installed", "1.6.0", False, "Opacus 1.6.0 DPOptimizer step (the installed release)"),
    ("dpsur", "paperlib", False, "re-implementation"),
])
def test_audit_inputs_code(impl, version, as_paper, word):
    inp = RA.audit_inputs(impl, "mnist", version=version, bundle={"indices": [1, 2], "split": "test"},
                          real_rounds=10, rounds=10)
    assert inp["code_as_paper"] is as_paper and word in inp["code"]
    assert inp["paper_code"] == BY_NAME[impl].paper_code and bool(BY_NAME[impl].as_paper) is as_paper


def test_a_stored_audit_of_another_layout_is_computed_again():
    """A cached audit that lacks fields of :class:`ImplementationAudit` (written by another version) is a miss:
    the audit runs and stores the whole record, never a half-read one."""
    store = _Store()
    store.load = lambda name, params: {"implementation": "dpsur", "eps_lower": {}}  # fields missing
    r = RA.audit_implementation("dpsur", "cnn-mnist", "synthetic", cache=store, **KW)
    assert not r.cached and r.n > 0 and r.eps_claimed > 0
    assert store.saved and set(next(iter(store.saved.values()))) >= {"eps_lower", "inputs", "step_check"}
