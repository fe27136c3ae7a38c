"""Tests for paperlib.implementations.opacus_code: the rule-based detector, the stored table against the
paper's Table 2, and one real step of the installed Opacus. No network."""

import json
import math
import os
import textwrap

import pytest

from paperlib.implementations.cache import CACHE_ENV
from paperlib.implementations import opacus_code as oc
from paperlib.implementations.opacus_code import cli, rules, table as tbl, wheels

ENGINE = "opacus/privacy_engine.py"
CLIPPER = "opacus/per_sample_gradient_clip.py"
SAMPLER = "opacus/utils/uniform_sampler.py"
OPTIMIZER = "opacus/optimizers/optimizer.py"


def src(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


def edit(s: str, old: str, new: str) -> str:
    """``s`` with ``old`` replaced by ``new``; fails if ``old`` is not there."""
    assert old in s, old
    return s.replace(old, new)


# -------------------------------------------------- synthetic sources, one per code generation

CLIPPER_SRC = src('''
    class PerSampleGradientClipper:
        def _scale_summed_grad(self, summed_grad, batch_size):
            """Average over the batch if loss_reduction is mean."""
            if self.loss_reduction == "mean":
                return summed_grad / batch_size
            return summed_grad
''')


def gen1_engine(upper_bound: bool, raise_after: bool = True) -> str:
    check = ""
    if upper_bound:
        body = "raise ValueError('too large')" if raise_after else "warnings.warn('too large')"
        check = f"""
        if batch_size > self.batch_size:
            {body}
"""
    return src(f'''
class PrivacyEngine:
    def __init__(self, module, batch_size, sample_size, noise_multiplier, max_grad_norm):
        self.batch_size = batch_size

    def step(self):
        self.steps += 1
        self.clipper.clip_and_accumulate()
        clip_values, batch_size = self.clipper.pre_step()
{textwrap.indent(textwrap.dedent(check), "        ")}
        params = (p for p in self.module.parameters() if p.requires_grad)
        for p, clip_value in zip(params, clip_values):
            noise = self._generate_noise(clip_value, p)
            if self.loss_reduction == "mean":
                noise /= batch_size
            p.grad += noise
''')


GEN2_ENGINE = src('''
class PrivacyEngine:
    def __init__(self, module, *, sample_rate=None, sample_size=None, loss_reduction="mean",
                 poisson: bool = False):
        self.poisson = poisson

    def step(self, is_empty: bool = False):
        if not is_empty:
            clip_values, batch_size = self.clipper.pre_step()
        else:
            batch_size = self.avg_batch_size
        for p, clip_value in zip(self.params, clip_values):
            noise = self._generate_noise(clip_value, p)
            if self.loss_reduction == "mean":
                noise /= batch_size
            p.grad += noise
            # For poisson, divide by avg_batch_size instead of batch_size
            if self.poisson and self.loss_reduction == "mean":
                p.grad *= batch_size / self.avg_batch_size

    def _set_sample_rate(self):
        if self.sample_rate is None:
            self.sample_rate = self.batch_size / self.sample_size
            self.avg_batch_size = AVG
''')

GEN3_ENGINE = src('''
class PrivacyEngine:
    def make_private(self, *, module, optimizer, data_loader, noise_multiplier, max_grad_norm,
                     poisson_sampling: bool = True):
        sample_rate = 1 / len(data_loader)
        expected_batch_size = EXPECTED
        optimizer = self._prepare_optimizer(optimizer, expected_batch_size=expected_batch_size)
        return module, optimizer, data_loader
''')

GEN3_OPTIMIZER = src('''
class DPOptimizer:
    def add_noise(self):
        for p in self.params:
            noise = _generate_noise(std=self.noise_multiplier * self.max_grad_norm, reference=p.summed_grad)
            p.grad = (p.summed_grad + noise).view_as(p)

    def scale_grad(self):
        if self.loss_reduction == "mean":
            for p in self.params:
                p.grad /= self.expected_batch_size * self.accumulated_iterations
''')

SAMPLER_SRC = "class UniformWithReplacementSampler(Sampler):\n    pass\n"


def test_generation1_without_upper_bound_is_asgm():
    r = rules.audit_sources({ENGINE: gen1_engine(False), CLIPPER: CLIPPER_SRC, SAMPLER: SAMPLER_SRC})
    assert (r["generation"], r["normalisation"], r["mechanism"]) == ("engine-step", "A", "ASGM")
    assert r["poisson_usable"] and not r["poisson_builtin"]
    assert r["primary"]["code"] == "noise /= batch_size" and r["primary"]["file"] == ENGINE
    fired = {e["rule"] for e in r["evidence"]}
    assert {"engine_realised_batch_size", "clipper_sum_over_batch_size", "poisson_sampler_shipped"} <= fired


def test_generation1_with_upper_bound_is_not_supported():
    r = rules.audit_sources({ENGINE: gen1_engine(True), CLIPPER: CLIPPER_SRC})
    assert r["normalisation"] == "A" and r["mechanism"] == rules.NOT_SUPPORTED and not r["poisson_usable"]
    ub = [e for e in r["evidence"] if e["rule"] == "engine_batch_size_upper_bound"]
    assert len(ub) == 1 and ub[0]["code"] == "if batch_size > self.batch_size:"
    # the line number points at that line of the source
    assert gen1_engine(True).splitlines()[ub[0]["line"] - 1].strip() == ub[0]["code"]


def test_upper_bound_only_counts_when_it_raises():
    r = rules.audit_sources({ENGINE: gen1_engine(True, raise_after=False), CLIPPER: CLIPPER_SRC})
    assert r["poisson_usable"] and r["mechanism"] == "ASGM"


def test_generation1_needs_the_mean_guard_and_the_clipper():
    unguarded = edit(gen1_engine(False),'if self.loss_reduction == "mean":\n                noise /= batch_size',
                                           'if self.loss_reduction == "sum":\n                noise /= batch_size')
    with pytest.raises(oc.AuditError, match="no code generation"):
        rules.audit_sources({ENGINE: unguarded, CLIPPER: CLIPPER_SRC})
    with pytest.raises(oc.AuditError):
        rules.audit_sources({ENGINE: gen1_engine(False)})  # the clipper's division is missing


def test_commented_out_code_does_not_match():
    commented = edit(gen1_engine(False),"                noise /= batch_size", "                # noise /= batch_size\n                pass")
    with pytest.raises(oc.AuditError):
        rules.audit_sources({ENGINE: commented, CLIPPER: CLIPPER_SRC})


def test_generation2_is_easgm():
    eng = GEN2_ENGINE.replace("AVG", "self.sample_rate * self.sample_size")
    r = rules.audit_sources({ENGINE: eng, CLIPPER: CLIPPER_SRC, SAMPLER: SAMPLER_SRC})
    assert (r["generation"], r["normalisation"], r["mechanism"]) == ("engine-poisson", "EA", "EASGM")
    assert r["poisson_builtin"] and r["poisson_usable"]
    assert r["primary"]["code"] == "p.grad *= batch_size / self.avg_batch_size"


def test_generation2_classifies_the_expression_not_the_version():
    eng = GEN2_ENGINE.replace("AVG", "int(self.sample_rate * self.sample_size)")
    r = rules.audit_sources({ENGINE: eng, CLIPPER: CLIPPER_SRC})
    assert r["normalisation"] == "FEA" and r["mechanism"] == "FEASGM"


def test_generation2_rescale_needs_poisson_guard():
    eng = edit(GEN2_ENGINE.replace("AVG", "self.sample_rate * self.sample_size"),
               "if self.poisson and self.loss_reduction", "if self.distributed and self.loss_reduction")
    r = rules.audit_sources({ENGINE: eng, CLIPPER: CLIPPER_SRC})
    assert r["generation"] == "engine-step" and r["normalisation"] == "A"


@pytest.mark.parametrize("expr, norm", [
    ("int(len(data_loader.dataset) * sample_rate)", "FEA"),
    ("len(data_loader.dataset) * sample_rate", "EA"),
    ("math.floor(len(data_loader.dataset) * sample_rate)", "FEA"),
])
def test_generation3(expr, norm):
    r = rules.audit_sources({ENGINE: GEN3_ENGINE.replace("EXPECTED", expr), OPTIMIZER: GEN3_OPTIMIZER})
    assert r["generation"] == "dp-optimizer" and r["normalisation"] == norm
    assert r["mechanism"] == rules.MECHANISM[norm] and r["poisson_builtin"] and r["poisson_usable"]
    assert r["primary"]["code"] == f"expected_batch_size = {expr}"
    fired = {e["rule"] for e in r["evidence"]}
    assert {"optimizer_noise_added_to_sum", "optimizer_divide_by_expected_batch_size"} <= fired


def test_generation3_division_must_be_in_scale_grad():
    opt = edit(GEN3_OPTIMIZER, "def scale_grad", "def unscale_grad")
    with pytest.raises(oc.AuditError):
        rules.audit_sources({ENGINE: GEN3_ENGINE.replace("EXPECTED", "int(n * sample_rate)"), OPTIMIZER: opt})


def test_unknown_code_raises():
    with pytest.raises(oc.AuditError, match="no code generation"):
        rules.audit_sources({ENGINE: "class PrivacyEngine:\n    pass\n"})
    with pytest.raises(oc.AuditError):
        rules.classify_expected_size("round(n * sample_rate)")
    with pytest.raises(oc.AuditError):
        rules.classify_expected_size("sample_rate")


def test_fragment_that_does_not_parse_uses_indentation():
    frag = "    def step(self):\n        if self.loss_reduction == 'mean':\n            noise /= batch_size\n        oops(:\n"
    hits = rules.Rule("x", "g", ENGINE, r"^\s*noise\s*/=\s*batch_size\s*$", "", in_def="step",
                   guard=r"loss_reduction").find({ENGINE: frag})
    assert [h.line for h in hits] == [3]


# -------------------------------------------------- the stored table and the paper's Table 2

# Table 2 of Wang et al. (2026), written out here independently of paperlib.implementations.opacus_code:
# version -> (normalisation, built-in Poisson update logic, mechanism)
NS = "Not supported"
PAPER = {
    **{v: ("A", False, NS) for v in ("0.9.0", "0.9.1", "0.10.0", "0.10.1", "0.11.0")},
    **{v: ("A", False, "ASGM") for v in ("0.12.0", "0.13.0")},
    **{v: ("EA", True, "EASGM") for v in ("0.14.0", "0.15.0")},
    **{v: ("FEA", True, "FEASGM") for v in (
        "1.0.0", "1.0.1", "1.0.2", "1.1.0", "1.1.1", "1.1.2", "1.1.3", "1.2.0", "1.3.0",
        "1.4.0", "1.4.1", "1.5", "1.5.1", "1.5.2", "1.5.3", "1.5.4")},
}


@pytest.fixture(scope="module")
def table():
    return oc.load_table()


def test_module_copy_of_table2_matches_the_paper():
    assert set(tbl.PAPER_TABLE2) == set(PAPER)
    for v, (norm, builtin, mech) in PAPER.items():
        p = tbl.PAPER_TABLE2[v]
        assert (p["normalisation"], p["poisson_builtin"], p["mechanism"]) == (norm, builtin, mech), v


def test_stored_table_agrees_with_table2(table):
    got = {r["version"]: r for r in table["releases"]}
    assert set(PAPER) <= set(got), sorted(set(PAPER) - set(got))
    for v, (norm, builtin, mech) in PAPER.items():
        r = got[v]
        assert (r["normalisation"], r["poisson_builtin"], r["mechanism"]) == (norm, builtin, mech), v
        assert r["in_paper_table2"]
    assert all(c["status"] == "agrees" for c in oc.compare_with_paper(table["releases"]) if c["version"] in PAPER)


def test_stored_table_is_complete_and_consistent(table):
    from packaging.version import Version

    vs = [r["version"] for r in table["releases"]]
    assert vs == sorted(vs, key=Version) and len(set(vs)) == len(vs)
    assert vs[0] == wheels.FIRST_VERSION and len(vs) >= 26 and table["n_releases"] == len(vs)
    assert "1.6.0" in vs  # released after the paper's table
    for r in table["releases"]:
        assert r["file"] == "opacus/privacy_engine.py" and r["line"] > 0 and r["code"]
        assert len(r["wheel_sha256"]) == 64 and r["wheel"].startswith(f"opacus-{r['version']}-")
        assert {"file": r["file"], "line": r["line"], "code": r["code"]}.items() <= r["primary"].items()
        assert any(e["line"] == r["line"] and e["file"] == r["file"] for e in r["evidence"])
        assert r["mechanism"] == (rules.MECHANISM[r["normalisation"]] if r["poisson_usable"] else NS)
        assert r["in_paper_table2"] == (Version(r["version"]) <= Version(oc.PAPER_LAST_VERSION))
    # later releases than the paper's: still FEASGM
    for r in table["releases"]:
        if Version(r["version"]) > Version(oc.PAPER_LAST_VERSION):
            assert r["mechanism"] == "FEASGM"


def test_stored_confirmations(table):
    conf = {c["opacus"]: c for c in table["confirmations"]}
    import opacus

    assert opacus.__version__ in conf
    for v, c in conf.items():
        if c["verdict"] == "error":
            continue
        r = next(r for r in table["releases"] if r["version"] == v)
        assert c["verdict"] == r["normalisation"] and c["mechanism"] == r["mechanism"], v


def test_cache_reaudit_matches_stored_table(table):
    """Offline: if the wheels are cached, re-auditing them gives the stored findings."""
    keys = ("normalisation", "poisson_builtin", "poisson_usable", "mechanism", "file", "line", "code", "wheel_sha256")
    checked = 0
    for r in table["releases"]:
        wheel = wheels.cached_wheel(r["version"])
        if wheel is None:
            continue
        again = oc.audit_wheel(wheel, r["version"])
        assert {k: again[k] for k in keys} == {k: r[k] for k in keys}, r["version"]
        checked += 1
    if checked == 0:
        pytest.skip(f"no Opacus wheels in {wheels.wheel_cache_dir()} (fill with: {oc.REFRESH_COMMAND})")


def test_offline_without_cache_or_table_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(oc.AuditError, match=r"--refresh"):
        oc.load_table(tmp_path / "missing.json")
    assert cli.main(["--output", str(tmp_path / "missing.json")]) == 1


def test_cli_prints_the_stored_table(capsys, table):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("\n| v") == len(table["releases"])
    assert "FEASGM" in out and "**new** (after v1.5.4)" in out
    assert cli.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_releases"] == len(table["releases"])


def test_markdown_escapes_pipes(table):
    md = tbl.markdown_table(table["releases"])
    header = md.splitlines()[0]
    for line in md.splitlines()[2:]:
        assert line.count(" | ") == header.count(" | "), line


# -------------------------------------------------- one real step of the installed Opacus


def test_installed_opacus_divides_by_floor_Nq():
    """N = 10, q = 0.25: N q = 2.5 is not an integer, floor(N q) = 2, and |B| varies."""
    pytest.importorskip("opacus")
    r = oc.step_check(seed=0, N=10, batch_size=3, d_noise=2048, n_batches=4)
    assert r["api"] == "v1-make_private"
    assert r["q"] == 0.25 and r["Nq"] == 2.5 and r["floor_Nq"] == 2
    assert r["verdict"] == "FEA" and r["mechanism"] == "FEASGM"
    signal, noise = r["runs"]
    assert signal["expected_batch_size"] == math.floor(10 * 0.25)
    for b in signal["batches"]:
        assert b["divisor"] == pytest.approx(2.0, rel=1e-5)
    # at least one batch whose realised size is neither 2 nor 2.5 (so A is ruled out)
    assert any(b["batch_size"] != 2 for b in signal["batches"])
    for b in noise["batches"]:
        assert b["divisor"] == pytest.approx(2.0, rel=0.1)


def test_table_renders_markdown_and_html():
    """The code audit's rows print as Markdown (the command line, pipes escaped) and show as the book's one
    table class (markup: code and bold)."""
    from paperlib.artifact.tables import show_table

    rec = {"version": "9.9.9", "file": "opacus/x.py", "line": 7, "code": "a | b", "normalisation": "EA",
           "divisor": "N q", "poisson_builtin": True, "mechanism": "EASGM"}
    md = tbl.markdown_table([rec], compare=False)
    assert md.splitlines()[2] == "| v9.9.9 | `x.py:7` | `a \\| b` | EA (N q) | ✓ | EASGM |"
    head, rows = tbl.records_table([rec], compare=False)
    t = show_table(rows, head, name="08_probe", caption="probe", markup=True, display=False)
    h = t._repr_html_()
    assert "<code>a | b</code>" in h and "Table 8." in h
    with pytest.raises(ValueError, match="^row 0 has 2 cells, expected 1"):
        show_table([["1", "2"]], ["a"], name="08_probe2", caption="probe", display=False)


# -------------------------------------------------- verified wheels (issue 11: planted-wheel finding)

import base64  # noqa: E402
import hashlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

# sha256 of the real opacus-0.15.0 wheel on the package index, written out here independently of the
# stored table (the table must agree with it)
SHA_0_15_0 = "5d78be2d9c02894ae7c10396e0a5187c402db6f6c1fccdac97f4f1a843f5b087"
STORED = "paperlib/resources/opacus_table2.json"
REAL_WHEEL_0_15_0 = wheels.wheel_cache_dir() / "opacus-0.15.0-py3-none-any.whl"  # the checkout's cache, if filled


def planted_wheel(folder: Path, version: str, witness: Path) -> Path:
    """An installable ``opacus-<version>-py3-none-any.whl`` whose ``opacus/__init__.py`` and
    ``opacus/privacy_engine.py`` write ``witness`` when imported."""
    payload = f"open({str(witness)!r}, 'w').write('the planted wheel ran')\n"
    files = {
        "opacus/__init__.py": payload + "__version__ = " + repr(version) + "\n",
        "opacus/privacy_engine.py": payload,
        f"opacus-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: opacus\nVersion: {version}\n",
        f"opacus-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                             "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"opacus-{version}.dist-info/RECORD"] = "\n".join(record + [f"opacus-{version}.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"opacus-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty PAPERLIB_CACHE; ``witness`` is the file a planted wheel's code would write."""
    root = tmp_path / "cache"
    (root / "opacus-src").mkdir(parents=True)
    monkeypatch.setenv(CACHE_ENV, str(root))
    return {"root": root, "src": root / "opacus-src", "witness": tmp_path / "planted-code-ran"}


def mismatch_line(wheel: Path) -> str:
    got = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return (f"wheel {wheel} has sha256 {got}, expected {SHA_0_15_0} for opacus 0.15.0 (stored in {STORED}); "
            "delete it and rerun")


def test_stored_table_holds_the_known_hash():
    assert wheels.stored_sha256("0.15.0") == SHA_0_15_0
    assert wheels.stored_sha256("9.9.9") is None


def test_planted_wheel_would_install_without_the_check(cache, tmp_path):
    """The planted wheel is a valid wheel: pip installs it (so the refusal below is what stops it)."""
    wheel = planted_wheel(cache["src"], "0.15.0", cache["witness"])
    r = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps",
                        "--no-index", "--no-compile", "--target", str(tmp_path / "t"), str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "t" / "opacus" / "__init__.py").is_file() and not cache["witness"].exists()


@pytest.mark.parametrize("download", [False, True])
def test_planted_wheel_refused_by_install_release(cache, download):
    wheel = planted_wheel(cache["src"], "0.15.0", cache["witness"])
    with pytest.raises(oc.WheelVerificationError) as e:
        oc.install_release("0.15.0", download=download)
    assert str(e.value) == mismatch_line(wheel)
    assert isinstance(e.value, oc.AuditError) and isinstance(e.value, ValueError)
    assert not (cache["root"] / "opacus-0.15.0").exists() and not cache["witness"].exists()
    assert wheel.is_file()  # the user deletes it; the library does not guess


def test_planted_wheel_refused_by_confirm_release_and_audit(cache):
    wheel = planted_wheel(cache["src"], "0.15.0", cache["witness"])
    with pytest.raises(oc.WheelVerificationError) as e:
        oc.confirm_release("0.15.0")
    assert str(e.value) == mismatch_line(wheel)
    with pytest.raises(oc.WheelVerificationError, match="expected " + SHA_0_15_0):
        oc.audit_wheel(wheel)
    with pytest.raises(oc.WheelVerificationError):
        tbl.audit_versions(["0.15.0"], download=False)
    assert cli.main(["--from-cache", "--confirm", "none", "--output", str(cache["root"] / "t.json")]) == 1
    assert not (cache["root"] / "t.json").exists() and not cache["witness"].exists()


def test_planted_wheel_refused_by_the_runner(cache):
    torch = pytest.importorskip("torch")
    from paperlib.implementations.runners import run_steps

    wheel = planted_wheel(cache["src"], "0.15.0", cache["witness"])
    X, y = torch.zeros(5, 1, 28, 28), torch.zeros(5, dtype=torch.long)
    for download in (False, True):
        with pytest.raises(oc.WheelVerificationError) as e:
            run_steps("opacus-0.15.0", "tiny", X, y, dataset="D", q=0.6, sigma=1.0, C=1.0, trials=1, seed=0,
                      download=download)
        assert str(e.value) == mismatch_line(wheel)
    assert not cache["witness"].exists()


def test_planted_wheel_through_the_cli_is_one_line(cache, tmp_path):
    """``python -m paperlib audit-implementation`` on the planted wheel: one error line, no traceback."""
    wheel = planted_wheel(cache["src"], "0.15.0", cache["witness"])
    env = dict(os.environ, PAPERLIB_CACHE=str(cache["root"]), PAPERLIB_RESULTS=str(tmp_path / "results"))
    r = subprocess.run([sys.executable, "-m", "paperlib", "audit-implementation", "--implementation", "opacus-0.15.0",
                        "--model", "cnn-mnist", "--dataset", "synthetic", "--N", "4", "--q", "0.6", "--sigma", "1",
                        "--C", "1", "--trials", "20", "--seed", "0"],
                       capture_output=True, text=True, env=env, cwd=str(Path(__file__).resolve().parents[2]))
    assert r.stderr == f"paperlib: error: {mismatch_line(wheel)}\n" and r.returncode == 2
    assert not cache["witness"].exists()


def test_release_without_stored_hash_is_refused(cache):
    wheel = planted_wheel(cache["src"], "9.9.9", cache["witness"])
    line = (f"wheel {wheel} is opacus 9.9.9, which has no sha256 stored in {STORED}; delete it and rerun, "
            f"or record the release from the package index with: {oc.REFRESH_COMMAND}")
    with pytest.raises(oc.WheelVerificationError) as e:
        wheels.verify_wheel(wheel)
    assert str(e.value) == line
    with pytest.raises(oc.WheelVerificationError) as e:
        oc.install_release("9.9.9")
    assert str(e.value) == line
    with pytest.raises(oc.WheelVerificationError, match="no sha256 stored"):
        wheels.fetch_wheel("9.9.9")  # refused before any download
    # only an explicit trust_new accepts it (the refresh, which records the value)
    assert wheels.verify_wheel(wheel, trust_new=True) == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert not (cache["root"] / "opacus-9.9.9").exists() and not cache["witness"].exists()


def test_refresh_records_a_new_release_from_a_fresh_download_only(cache, monkeypatch):
    """trust_new never trusts a file found in the cache: the wheel is downloaded afresh and replaces it."""
    old = planted_wheel(cache["src"], "9.9.9", cache["witness"])
    old.write_bytes(old.read_bytes() + b"tampered")
    index = cache["root"] / "index"  # what the package index serves
    fresh = planted_wheel(index, "9.9.9", cache["root"] / "unused")
    calls = []

    def fake_pip(*args, timeout=600):  # stands in for ``pip download`` from the index
        calls.append(args)
        assert args[0] == "download" and args[-1].startswith("opacus==")
        served = wheels.cached_wheel(args[-1].split("==")[1], index)
        shutil.copy(served, Path(args[args.index("-d") + 1]) / served.name)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(wheels, "_pip", fake_pip)
    got = wheels.fetch_wheel("9.9.9", trust_new=True)
    assert len(calls) == 1 and got == old and got.read_bytes() == fresh.read_bytes()
    assert wheels.verify_wheel(got, trust_new=True) == hashlib.sha256(fresh.read_bytes()).hexdigest()
    # a download of a release with a stored hash that does not match is refused and not kept
    planted_wheel(index, "0.15.0", cache["witness"])
    with pytest.raises(oc.WheelVerificationError, match="expected " + SHA_0_15_0):
        wheels.fetch_wheel("0.15.0", trust_new=True)
    assert wheels.cached_wheel("0.15.0") is None and not cache["witness"].exists()


def test_planted_install_folder_without_wheel_is_not_used(cache):
    torch = pytest.importorskip("torch")
    from paperlib.implementations.runners import ReleaseNotAvailable, run_steps

    planted = cache["root"] / "opacus-0.15.0" / "opacus"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(cache['witness'])!r}, 'w').write('ran')\n")
    with pytest.raises(oc.AuditError, match="not in the wheel cache"):
        oc.install_release("0.15.0")
    X, y = torch.zeros(5, 1, 28, 28), torch.zeros(5, dtype=torch.long)
    with pytest.raises(ReleaseNotAvailable) as e:
        run_steps("opacus-0.15.0", "tiny", X, y, dataset="D", q=0.6, sigma=1.0, C=1.0, trials=1, seed=0,
                  download=False)
    assert len(str(e.value).splitlines()) == 1 and "--refresh" in str(e.value)
    assert not cache["witness"].exists()


@pytest.fixture
def real_wheel(cache):
    """The real opacus-0.15.0 wheel copied into the empty cache (skips when it is not available offline)."""
    if not REAL_WHEEL_0_15_0.is_file():
        pytest.skip(f"the real opacus-0.15.0 wheel is not in {REAL_WHEEL_0_15_0.parent} (offline; fill it with: "
                    f"{oc.REFRESH_COMMAND})")
    if hashlib.sha256(REAL_WHEEL_0_15_0.read_bytes()).hexdigest() != SHA_0_15_0:
        pytest.skip(f"{REAL_WHEEL_0_15_0} is not the real opacus-0.15.0 wheel (sha256 differs)")
    return Path(shutil.copy(REAL_WHEEL_0_15_0, cache["src"]))


def test_real_wheel_installs_and_is_reused_only_while_intact(cache, real_wheel, monkeypatch):
    target = oc.install_release("0.15.0")
    assert target == cache["root"] / "opacus-0.15.0"
    assert (target / wheels.INSTALL_MARKER).read_text().strip() == SHA_0_15_0
    assert wheels.verify_install(target, real_wheel, SHA_0_15_0)
    with zipfile.ZipFile(real_wheel) as z:
        original = z.read("opacus/__init__.py")
    assert (target / "opacus" / "__init__.py").read_bytes() == original

    def no_pip(*args, **kw):
        raise AssertionError("pip called although the install is intact")

    with monkeypatch.context() as m:
        m.setattr(wheels, "_pip", no_pip)
        assert oc.install_release("0.15.0") == target  # reused as it is
        (target / "opacus" / "__pycache__").mkdir(exist_ok=True)
        (target / "opacus" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"never trusted")
        assert oc.install_release("0.15.0") == target  # compiled files are dropped, not trusted
        assert not (target / "opacus" / "__pycache__").exists()
    # each way of tampering with the folder makes it be installed again from the verified wheel
    tampers = [
        lambda: (target / "opacus" / "__init__.py").write_text(f"open({str(cache['witness'])!r}, 'w')\n"),
        lambda: (target / "json.py").write_text("raise SystemExit('shadowing the standard library')\n"),
        lambda: (target / wheels.INSTALL_MARKER).write_text("0" * 64 + "\n"),
        lambda: (target / wheels.INSTALL_MARKER).unlink(),
        lambda: (target / "opacus" / "privacy_engine.py").unlink(),
    ]
    for tamper in tampers:
        tamper()
        assert not wheels.verify_install(target, real_wheel, SHA_0_15_0)
        assert oc.install_release("0.15.0") == target
        assert wheels.verify_install(target, real_wheel, SHA_0_15_0)
        assert (target / "opacus" / "__init__.py").read_bytes() == original and not (target / "json.py").exists()
    assert not cache["witness"].exists()
    assert not [p for p in cache["root"].iterdir() if p.name.startswith(".opacus-") and p.is_dir()]  # no temp folders


def test_real_wheel_audits_and_replaces_a_planted_install(cache, real_wheel):
    torch = pytest.importorskip("torch")
    from paperlib.implementations.runners import run_steps

    rec = oc.audit_wheel(real_wheel)
    assert rec["wheel_sha256"] == SHA_0_15_0 and rec["mechanism"] == "EASGM"
    planted = cache["root"] / "opacus-0.15.0" / "opacus"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(cache['witness'])!r}, 'w').write('ran')\n")
    X = torch.randn(5, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    y = torch.zeros(5, dtype=torch.long)
    r = run_steps("opacus-0.15.0", "tiny", X, y, dataset="D", q=0.6, sigma=1.0, C=1.0, trials=2, seed=0,
                  download=False)
    assert r["version"] == "0.15.0" and r["updates"].shape[0] == 2
    assert not cache["witness"].exists()
    assert not list((cache["root"] / "opacus-0.15.0").rglob("__pycache__"))  # ran without writing bytecode


def test_concurrent_installs_give_one_intact_install(cache, real_wheel):
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        targets = list(ex.map(lambda _: oc.install_release("0.15.0"), range(2)))
    assert targets[0] == targets[1] and wheels.verify_install(targets[0], real_wheel, SHA_0_15_0)


def test_a_rewrite_keeps_the_confirmations_of_unchanged_wheels(tmp_path):
    """--refresh/--from-cache with --confirm installed (the default) confirms one release by a real step:
    the stored confirmations of the others are kept where their wheel's sha256 is unchanged, dropped
    (and said so) where it changed; the one confirmed again replaces its stored record."""
    path = tmp_path / "table.json"
    path.write_text(json.dumps({
        "generated_utc": "2026-11-29T13:48:17Z",
        "releases": [{"version": "0.15.0", "wheel_sha256": "aa"}, {"version": "1.0.2", "wheel_sha256": "bb"},
                     {"version": "1.6.0", "wheel_sha256": "dd"}],
        "confirmations": [{"opacus": "0.15.0", "verdict": "EA"}, {"opacus": "1.0.2", "verdict": "FEA"},
                          {"opacus": "1.6.0", "verdict": "old"}]}))
    lines = []
    kept = cli._kept_confirmations(path, [{"opacus": "1.6.0", "verdict": "FEA"}],
                                     {"0.15.0": "aa", "1.0.2": "cc", "1.6.0": "dd"}, lines.append)
    assert kept == [{"opacus": "0.15.0", "verdict": "EA", "kept_from": "2026-11-29T13:48:17Z"}]
    assert lines == ["kept 1 stored real-step confirmation(s) of unchanged wheels; dropped 1 whose wheel changed "
                     "or is no longer audited: 1.0.2"]
    assert cli._kept_confirmations(tmp_path / "none.json", [], {}, lines.append) == []  # a first build
