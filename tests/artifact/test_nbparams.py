"""paperlib.artifact.nbparams: a notebook's parameters read from its source with ast, never run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from paperlib.artifact import notebook as pf
from paperlib.artifact.nbparams import MODES, NOTEBOOKS_DIR, notebook_params

ROOT = Path(__file__).resolve().parents[2]

HEAD = '''# %% tags=["parameters"]
MODE = "quick"
DEVICE = "cpu"
SEED = 0

# %%
from paperlib.artifact import notebook as pf
'''


def _nb(tmp_path, body: str, name: str = "99_x") -> str:
    (tmp_path / f"{name}.py").write_text(HEAD + body, encoding="utf-8")
    return name


def test_literals_names_tuples_and_the_parameter_cell(tmp_path):
    nb = _nb(tmp_path, '''
A = 3
B = -2.5
L = [1, "x", (2, 3), None, True]
D = {"a": 1, 2: [3, -4]}
S = {1, 2}
N, SIGMA = 4, 10.0
(P, [Q, R]) = (1, (2, 3))
ALIAS = L
X = Y = [7]
''')
    p = notebook_params(nb, "smoke", notebooks_dir=tmp_path)
    assert (p["MODE"], p["DEVICE"], p["SEED"]) == ("smoke", "cpu", 0)  # MODE overridden, the others kept
    assert p["A"] == 3 and p["B"] == -2.5 and p["L"] == [1, "x", (2, 3), None, True]
    assert p["D"] == {"a": 1, 2: [3, -4]} and p["S"] == {1, 2}
    assert (p["N"], p["SIGMA"], p["P"], p["Q"], p["R"]) == (4, 10.0, 1, 2, 3)
    assert p["ALIAS"] == p["L"] and p["ALIAS"] is not p["L"]  # fresh copies
    assert p["X"] == p["Y"] == [7] and p["X"] is not p["Y"]
    assert notebook_params(nb, "full", tmp_path)["MODE"] == "full"


def test_pick_and_mode_conditionals_follow_the_mode(tmp_path):
    nb = _nb(tmp_path, '''
T = pf.pick(MODE, smoke=400, quick=4_000, full=10_000)
PANELS = pf.pick(MODE, smoke=(), quick=("mnist",), full=("mnist", "fmnist"))
NESTED = {"a": pf.pick(MODE, smoke=1, quick=2, full=None)}
AM = "full" if MODE == "full" else "quick"
NE = [1] if MODE != "smoke" else [2]
ON_DEVICE = 1 if DEVICE == "cuda" else 0
SENS = T if MODE == "full" else [3]
''')
    want = {"smoke": (400, (), 1, "quick", [2], [3]), "quick": (4_000, ("mnist",), 2, "quick", [1], [3]),
            "full": (10_000, ("mnist", "fmnist"), None, "full", [1], 10_000)}
    for mode, (t, panels, nested, am, ne, sens) in want.items():
        p = notebook_params(nb, mode, tmp_path)
        assert (p["T"], p["PANELS"], p["NESTED"]["a"], p["AM"], p["NE"], p["SENS"]) == \
            (t, panels, nested, am, ne, sens), mode
        assert p["ON_DEVICE"] == 0  # DEVICE keeps the parameter cell's "cpu"
        assert p["T"] == pf.pick(mode, smoke=400, quick=4_000, full=10_000)  # as the real pick


def test_anything_else_is_skipped_not_guessed(tmp_path):
    nb = _nb(tmp_path, '''
import math
CALL = len([1, 2])
COMP = [x for x in range(3)]
ARITH = 2 * 3
ATTR = math.pi
UNKNOWN = NOT_DEFINED
STAR = [*[1]]
SPREAD = {**{"a": 1}}
OTHER_PICK = other.pick(MODE, smoke=1, quick=2, full=3)
BAD_PICK = pf.pick(MODE, smoke=1, quick=2)
CHAINED = 1 if 1 < 2 else 0
PARTIAL = [1, len([])]
KEPT = 1
KEPT = len([])
LATER = 5
for LATER in range(2):
    pass
if True:
    INSIDE = 1
def fn():
    global G
    G = 2
G = 1
MUT = {"a": 1}
MUT["b"] = 2
LST = [1]
LST.append(2)
TUP = (1, 2)
TUP.count(1)
AUG = 1
AUG += 1
def later():
    INNER[0] = 1
INNER = [0]
SAFE = {"a": 1}
SAFE.get("a")
N, M = 1, len([])
''')
    p = notebook_params(nb, "full", tmp_path)
    for name in ("CALL", "COMP", "ARITH", "ATTR", "UNKNOWN", "STAR", "SPREAD", "OTHER_PICK", "BAD_PICK", "CHAINED",
                 "PARTIAL", "KEPT", "LATER", "INSIDE", "G", "MUT", "LST", "AUG", "INNER", "N", "M", "math", "fn"):
        assert name not in p, name
    assert p["TUP"] == (1, 2) and p["SAFE"] == {"a": 1}  # no in-place change: kept


def test_pick_under_other_import_names(tmp_path):
    body = "import paperlib.artifact.notebook as F\nfrom paperlib.artifact.notebook import pick as choose\n" \
           "A = F.pick(MODE, smoke=1, quick=2, full=3)\nB = choose(MODE, smoke=1, quick=2, full=3)\n" \
           "C = pick(MODE, smoke=1, quick=2, full=3)\n"
    (tmp_path / "98_y.py").write_text('MODE = "quick"\n' + body, encoding="utf-8")
    p = notebook_params("98_y", "quick", tmp_path)
    assert (p["A"], p["B"]) == (2, 2) and "C" not in p  # a bare `pick` is not the figures' one here


def test_bad_name_and_mode_are_one_line(tmp_path):
    nb = _nb(tmp_path, "A = 1\n")
    for bad in ("nope", "", "../99_x", None, 4):
        with pytest.raises(ValueError, match=r"^name must be a notebook in .*99_x.*got ") as exc:
            notebook_params(bad, notebooks_dir=tmp_path)
        assert "\n" not in str(exc.value)
    for bad in ("huge", "FULL", None):
        with pytest.raises(ValueError, match=r"^mode must be one of smoke, quick, full, got ") as exc:
            notebook_params(nb, bad, tmp_path)
        assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="name must be a notebook"):
        notebook_params("99_x", notebooks_dir=tmp_path / "missing")


def test_modes_and_default_folder():
    assert MODES == pf.MODES
    assert NOTEBOOKS_DIR == ROOT / "notebooks"


def test_the_real_notebooks():
    p4 = {m: notebook_params("04_audit_figure2", m) for m in MODES}
    assert p4["full"]["TRIALS"] == 10_000 and p4["smoke"]["TRIALS"] == 400 and p4["quick"]["TRIALS"] == 10_000
    assert p4["full"]["SENS_N"] == p4["full"]["N_VALUES"] == [2, 3, 4, 5] and p4["smoke"]["SENS_N"] == [3]
    assert p4["full"]["SENS_SETTINGS"] == (("easgm", 0.5), ("asgm", 0.7), ("asgm", 0.5))
    assert (p4["full"]["N_DIM"], p4["full"]["SIGMA"], p4["full"]["C"], p4["full"]["DELTA"]) == (100, 10.0, 0.1, 1e-5)
    p5 = notebook_params("05_audit_figure3")  # default mode: full
    assert p5["DISTINGUISHERS"] == ["optimal", "normality", {"name": "normality", "ties": "half"}]
    assert "COMMON" not in p5  # changed in place under `if DEVICE == "cpu":`: not guessed
    panels = {m: notebook_params("06_audit_real_figure4", m)["PAPER_MODEL_PANELS"] for m in MODES}
    assert panels == {"smoke": (), "quick": ("mnist", "fmnist", "cifar10"), "full": ("mnist", "fmnist", "cifar10")}
    p6 = notebook_params("06_audit_real_figure4", "full")
    assert p6["AUDIT_MODE"] == "full" and notebook_params("06_audit_real_figure4", "quick")["AUDIT_MODE"] == "quick"
    assert list(p6["DATASETS"]) == ["mnist", "fmnist", "cifar10"] and len(p6["METHODS"]) == 10
    p7 = notebook_params("07_opacus_feasgm_figure6", "smoke")
    assert p7["IMPLEMENTATIONS"] == ("opacus-1.0.2", "opacus-installed")
    assert p7["CHECK_TRIALS"] == {"opacus-1.0.2": 20, "opacus-installed": 20}


@pytest.mark.parametrize("nb", sorted(p.stem for p in NOTEBOOKS_DIR.glob("[0-9]*.py")))
def test_every_notebook_reads_its_parameter_cell(nb):
    for mode in MODES:
        p = notebook_params(nb, mode)
        assert p["MODE"] == mode and "DEVICE" in p and "SEED" in p


def test_never_runs_the_file(tmp_path):
    flag = tmp_path / "ran"
    nb = _nb(tmp_path, f"open({str(flag)!r}, 'w').write('x')\nA = 1\n")
    assert notebook_params(nb, notebooks_dir=tmp_path)["A"] == 1 and not flag.exists()


def test_imports_only_the_standard_library():
    code = ("import sys; import paperlib.artifact.nbparams\n"
            "bad = [m for m in ('numpy', 'torch', 'matplotlib', 'paperlib.artifact.notebook') if m in sys.modules]\n"
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
