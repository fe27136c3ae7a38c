"""README.md's "From Python" example runs as written and prints what it says."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _block(section: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```", body, re.S)
    assert m, f"no python block in README section {section!r}"
    return m.group(1)


def test_from_python_example_runs_and_matches_its_comments():
    code = _block("From Python")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 6
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    eps, claim = map(float, r.stdout.splitlines()[0].split())
    assert abs(eps - 0.85) < 0.005 and abs(claim - 0.00092) < 0.00001  # the numbers the comment states
    assert r.stdout.splitlines()[1] == "(700, 701)"


def test_cli_contract_keys_are_printed():
    """The JSON keys the README's table promises for `epsilon` are what the command prints."""
    import json

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `epsilon` |"))
    promised = set(re.findall(r"`([a-z_]+)`", row.split("|")[3]))
    r = subprocess.run([sys.executable, "-m", "paperlib", "epsilon", "--mechanism", "easgm", "--bound", "upper",
                        "--N", "999", "--q", "0.005", "--sigma", "10", "--n", "26010", "--delta", "1e-5"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    out = json.loads(r.stdout)
    assert promised - {"note", "claim", "null"} <= set(out), promised - set(out)  # a note only when eps is infinite


def test_dp_accounting_example_composes_an_exported_round():
    """README's "Use with dp_accounting, riskcal and Opacus" block runs as written: 100 exported certified EASGM rounds
    and dp_accounting's own SGM event compose to about 5.77, at least paperlib's own 100-round lower end."""
    code = _block("Use with dp_accounting, riskcal and Opacus")
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 6
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    eps = float(r.stdout.split()[0])
    import paperlib as pl

    lo, hi = pl.certified_guarantee(pl.Setting("easgm", 60_000, 0.004, 1.1, 26_010, rounds=100,
                                               delta=1e-5)).epsilon_bounds(1e-5)
    assert lo <= eps <= 1.05 * hi and abs(eps - 5.77) < 0.01, (eps, lo, hi)


def test_check_any_code_example_runs_and_prints_what_its_comment_says():
    """README's "Check any DP-SGD code" Python block runs as written and prints the sentence its comment shows."""
    code = _block("Check any DP-SGD code")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    want = code.split("# -> ")[1].split("...")[0].strip()
    assert r.stdout.strip().startswith(want), (r.stdout, want)
