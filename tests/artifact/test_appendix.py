"""Tests for paperlib.artifact.runlog (measured runs) and paperlib.artifact.appendix (the artifact appendix)."""

import json
import re
import time
from pathlib import Path

import pytest

from paperlib.artifact import appendix, claims, provenance as pv, runlog
from paperlib.artifact.prose import clauses

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def results(tmp_path, monkeypatch):
    d = tmp_path / "results"
    monkeypatch.setenv(pv.RESULTS_ENV, str(d))
    monkeypatch.chdir(tmp_path)
    return d


def test_notebook_record_counts_bytes_written_during_the_run(results):
    (results / "old.json").parent.mkdir(parents=True)
    (results / "old.json").write_text("x" * 500)
    start = time.time() + 1  # files modified before the start do not count
    time.sleep(1.05)
    (results / "new.json").write_text("y" * 1234)
    p = runlog.record_notebook("04_audit_figure2", mode="quick", device="cpu", seed=0, start_s=start, wall_s=12.34)
    rec = json.loads(p.read_text())
    assert p.name == "notebook-04_audit_figure2-quick.json"
    assert rec["bytes_written"] == 1234 and rec["wall_s"] == 12.3 and rec["kind"] == "notebook"


def test_tier_keeps_the_last_cold_run(results):
    start = time.time() - 5
    for name in ("01_a", "02_b"):
        runlog.record_notebook(name, mode="smoke", device="cpu", seed=0, start_s=start, wall_s=1.0)
    doc = json.loads(runlog.record_tier(mode="smoke", device="cpu", start_s=start, notebooks=2).read_text())
    assert doc["last"]["cold"] and doc["last_cold"] == doc["last"] and doc["last"]["wall_s"] >= 5
    # a warm run (nothing executed after its start) is recorded, the cold one is kept
    doc = json.loads(runlog.record_tier(mode="smoke", device="cpu", start_s=time.time() + 5,
                                        notebooks=2).read_text())
    assert not doc["last"]["cold"] and doc["last"]["notebooks_executed"] == []
    assert doc["last_cold"]["notebooks_executed"] == ["01_a", "02_b"]


def test_experiments_follow_the_notebooks():
    exps = appendix.experiments(ROOT / "notebooks")
    assert [e["id"] for e in exps] == [f"E{k}" for k in range(1, len(exps) + 1)]
    by_id = {e["id"]: e for e in exps}
    # every claim with a check is supported by exactly the experiment its notebook is
    for c in claims.CLAIMS:
        if c.check is not None:
            assert c.id in by_id[f"E{int(c.notebook[:2])}"]["claims"], c.id
    assert all(e["title"] and not e["title"].startswith("#") for e in exps)


def test_render_uses_the_records(results):
    start = time.time() - 2
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks")
    assert "none has on this machine yet" in text and "it has not passed on this machine yet" in text
    runlog.record_notebook("04_audit_figure2", mode="quick", device="cpu", seed=0, start_s=start, wall_s=95.0,
                           peak_memory_bytes=1_534_000_000)
    runlog.record_tier(mode="quick", device="cpu", start_s=start, notebooks=1)
    runlog.record_test(wall_s=610, summary="2,450 passed, 14 skipped in 400.00s")
    pv.write_json_atomic(results / "grade.json", {"claims": [{"id": "C2", "verdict": "reproduced", "mode": "quick"}]})
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks")
    e4 = text.split("### E4:")[1].split("### E5:")[0]
    assert "1.6 min of compute on the cpu" in e4 and "peak memory 1.5 GB" in e4
    assert "smoke: [3 human-minutes; compute time and disk not measured]. Not run on this machine" in e4
    assert "full: [3 human-minutes; compute time and disk not measured]. Not run on this machine" in e4
    # the hardware section gives the measured peak, the badges the measured make test
    assert "at most 1.5 GB, in 04_audit_figure2 (quick mode)" in text and "8 GB" not in text
    assert "Measured here: 10.2 min on" in text and "2,450 passed, 14 skipped" in text
    assert "Supports C2 (Fig. 2)" in e4 and "Tolerance:" in e4
    assert "| C2 | Fig. 2 |" in text and "reproduced (quick)" in text
    quick_row = next(line for line in text.splitlines() if line.startswith("| quick |"))
    assert "1 of 1" in quick_row
    assert next(line for line in text.splitlines() if line.startswith("| full |")).count("not measured") == 2
    # the two forms differ only in their links
    assert "(notebooks/04_audit_figure2.ipynb)" in appendix.render(book=True, notebooks_dir=ROOT / "notebooks")
    assert f"({ROOT / 'notebooks' / '04_audit_figure2.py'})" in text


def test_main_writes_both_files(results, tmp_path):
    book = tmp_path / "book" / "appendix.md"
    assert appendix.main(["--book-page", str(book), "--notebooks", str(ROOT / "notebooks")]) == 0
    assert book.read_text().startswith("# Artifact appendix")
    assert (results / "artifact_appendix.md").is_file()
    with pytest.raises(SystemExit):
        appendix.main(["--notebooks", str(tmp_path / "none")])


def test_failed_cell_names_the_cell(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# t"},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "x = 1", "outputs": []},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": ["# why\n", "assert x == 2, 'x'\n"],
         "outputs": [{"output_type": "error", "ename": "AssertionError", "evalue": "x", "traceback": []}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "f.ipynb"
    p.write_text(json.dumps(nb))
    assert runlog.failed_cell(p) == "cell 3 (In [2]): assert x == 2, 'x' -> AssertionError: x"
    nb["cells"][2]["outputs"] = []
    p.write_text(json.dumps(nb))
    assert runlog.failed_cell(p) is None


# ---------------------------------------------------------------- the venues' forms (issue 13)
def _headings(text: str) -> list[tuple[int, str]]:
    """``(level, text)`` of every Markdown heading outside code fences."""
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            hashes = len(line) - len(line.lstrip("#"))
            out.append((hashes, line[hashes:].strip()))
    return out


def _in_order(wanted, got) -> bool:
    it = iter(got)
    return all(any(w == g for g in it) for w in wanted)


def test_cost_bracket_is_usenix_shaped():
    assert appendix.cost(3, 5400, 2.5e9) == "[3 human-minutes + 1.5 compute-hours + 2.5 GB disk]"
    assert appendix.cost(3, 16.0, 1.2e6) == "[3 human-minutes + 0.0044 compute-hours + 0.0012 GB disk]"
    assert appendix.cost(5, None, None) == "[5 human-minutes; compute time and disk not measured]"
    assert appendix.cost(5, 3600, None) == "[5 human-minutes + 1 compute-hours + not measured]"
    assert appendix.cost(3, 36_000, 64e9) == "[3 human-minutes + 10 compute-hours + 64 GB disk]"
    assert appendix.cost(3, 0.5, 10) == "[3 human-minutes + <0.001 compute-hours + <0.001 GB disk]"


def test_usenix_sections_in_order_and_levels_consecutive(results):
    text = appendix.render(book=True, notebooks_dir=ROOT / "notebooks", citation_file=ROOT / "CITATION.cff")
    hs = _headings(text)
    assert hs[0] == (1, "Artifact appendix")
    assert _in_order(appendix.USENIX_SECTIONS, hs), [h for h in hs if h[0] <= 3]
    # the book is built with -W: a heading may go down at most one level at a time
    assert all(b[0] <= a[0] + 1 for a, b in zip(hs, hs[1:]))
    exps = appendix.experiments(ROOT / "notebooks")
    assert [h[1].split(":")[0] for h in hs if h[0] == 4] == [e["id"] for e in exps]
    assert "independent reproduction, not the authors' code" in text


def test_experiments_are_costed_per_mode_from_the_records(results):
    start = time.time() - 2
    runlog.record_notebook("05_audit_figure3", mode="quick", device="cpu", seed=0, start_s=start, wall_s=720.0)
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks")
    e5 = text.split("#### E5:")[1].split("#### E6:")[0]
    lines = [line.strip() for line in e5.splitlines() if line.strip().startswith("- ") and "human-minutes" in line]
    assert [line.split(":")[0] for line in lines] == ["- smoke", "- quick", "- full"]
    assert lines[1].startswith("- quick: [3 human-minutes + 0.2 compute-hours + ")
    assert "not measured" in lines[0] and "`make all MODE=smoke` measures it" in lines[0]
    assert "?" not in lines[0] + lines[2] and "not measured" in lines[2]


def test_access_reads_citation_cff(results, tmp_path):
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks", citation_file=ROOT / "CITATION.cff")
    access = text.split("### How to access")[1].split("### Hardware")[0]
    cite = appendix.citation(ROOT / "CITATION.cff")
    assert cite["found"] and cite["license"] == "MIT"
    if cite["doi"] is None:  # no DOI yet: a visible placeholder, not an empty field
        assert f"**DOI:** {appendix.DOI_PLACEHOLDER}" in access
    cff = tmp_path / "CITATION.cff"
    cff.write_text("cff-version: 1.2.0\ntitle: t\nversion: 9.9\nlicense: MIT\n"
                   "repository-code: https://example.org/r\nurl: https://example.org/site/\n"
                   "doi: 10.5281/zenodo.123\n")
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks", citation_file=cff)
    access = text.split("### How to access")[1].split("### Hardware")[0]
    assert "**DOI:** 10.5281/zenodo.123" in access and "**Repository:** https://example.org/r" in access
    assert "https://example.org/site/" in access and "placeholder" not in access
    assert "Artifact version 9.9" in text
    # missing or broken metadata: said so, placeholders shown, no exception
    missing = appendix.citation(tmp_path / "none.cff")
    assert not missing["found"] and "not found" in missing["error"]
    (tmp_path / "bad.cff").write_text("- a list\n- not a mapping\n")
    assert "not a YAML mapping" in appendix.citation(tmp_path / "bad.cff")["error"]
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks", citation_file=tmp_path / "none.cff")
    assert appendix.DOI_PLACEHOLDER in text and appendix.URL_PLACEHOLDER in text


def test_limitations_name_the_claims_the_grade_does_not_confirm(results):
    pv.write_json_atomic(results / "grade.json", {"claims": [
        {"id": c.id, "verdict": "reproduced", "mode": "quick"} for c in claims.CLAIMS if c.id != "C3"]
        + [{"id": "C3", "verdict": "not reproduced", "mode": "quick", "reason": "violated: n=100"}]})
    text = appendix.render(book=False, notebooks_dir=ROOT / "notebooks")
    lim = text.split("## Limitations")[1].split("## Notes on Reusability")[0]
    assert "C3: not reproduced" in lim
    assert "C2" not in lim


def test_a_main_result_ends_its_verdict_with_one_full_stop(results):
    """The verdict's plain sentence ends in a full stop of its own; the Main Results line adds none (it read
    "holds, on its own setting.." before)."""
    pv.write_json_atomic(results / "grade.json", {"claims": [
        {"id": c.id, "verdict": "reproduced", "mode": "quick"} for c in claims.CLAIMS]})
    text = appendix.render_pets(notebooks_dir=ROOT / "notebooks")
    main = text.split("### Main Results and Claims")[1].split("### Experiments")[0]
    assert main.count("Last verdict: reproduced (quick)") == len(claims.CLAIMS)
    assert not re.search(r"[^.]\.\.(\s|$)", main), re.findall(r".{60}\.\.", main)


def test_main_writes_the_pets_form(results, tmp_path):
    book = tmp_path / "book" / "appendix.md"
    assert appendix.main(["--book-page", str(book), "--notebooks", str(ROOT / "notebooks"),
                          "--citation", str(ROOT / "CITATION.cff")]) == 0
    pets = (results / "ARTIFACT-APPENDIX.md").read_text()
    hs = _headings(pets)
    assert hs[0] == (1, "Artifact Appendix")
    assert _in_order(appendix.PETS_SECTIONS, hs)
    assert all(b[0] <= a[0] + 1 for a, b in zip(hs, hs[1:]))
    n_exp = len(appendix.experiments(ROOT / "notebooks"))
    assert sum(h[1].startswith("Experiment ") for h in hs if h[0] == 4) == n_exp
    assert sum(h[1].startswith("Main Result ") for h in hs if h[0] == 4) == len(claims.CLAIMS)
    assert "Rethinking the Security of DP-SGD" in pets and "not the authors' code" in pets
    with pytest.raises(SystemExit):
        appendix.main(["--notebooks", str(ROOT / "notebooks"), "--citation", str(tmp_path / "none.cff")])


# ---------------------------------------------------------------- one verdict everywhere (issue 14)
def _pt(p, claim, trials):
    from paperlib.audit import stats as S

    nd = trials // 2
    k = int(round(p * nd))
    lo, hi = S.clopper_pearson(k, nd)
    return {"eps_lower": float(S.eps_lower(hi, hi, 1e-5)), "eps_claimed": claim, "trials": trials, "delta": 1e-5,
            "fpr": k / nd, "fnr": k / nd, "fpr_ci": [lo, hi], "fnr_ci": [lo, hi]}


def _write_result(d, name, data, mode="quick"):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps({"key": "0" * 16, "params": {"mode": mode}, "data": data,
                                      "provenance": {"mode": mode}}))


def test_grade_page_json_appendix_and_terminal_agree(results, tmp_path):
    """The four places a verdict is shown give the same verdict for every claim, reason first."""
    # C3 not reproduced (the paper's distinguisher below the claim at n = 100, 10,000 trials)
    pts = []
    for mech, q, claim in (("asgm", 0.7, 0.243), ("easgm", 0.05, 0.0144)):
        for n, p in {1: 0.3, 10: 0.2, 30: 0.1, 100: 0.02, 1000: 0.01, 10000: 0.005}.items():
            pp = 0.47 if (mech, n) == ("asgm", 100) else p
            pts.append({"point": {"mechanism": mech, "q": q, "N": 4, "n": n},
                        "results": {"optimal": _pt(p, claim, 10000),
                                    claims.PAPER_DISTINGUISHER: _pt(pp, claim, 10000)}})
    _write_result(results, "05_fig3_audit.json", {"complete": True, "points": pts})
    # C6 partly reproduced: real data named, but the inputs were not recorded
    o, n = _pt(0.0, 0.174, 10000), _pt(0.01, 0.174, 10000)
    r = {"dataset": "mnist", "mechanism": "feasgm", "eps_claimed": 0.174, "trials": 10000, "delta": 1e-5,
         "check": {"passed": True}, "version": "1.0.0", "q": 0.5, "n": 1485217}
    for k in ("eps_lower", "fpr", "fnr", "fpr_ci", "fnr_ci"):
        r[k] = {"optimal": o[k], claims.PAPER_DISTINGUISHER: n[k]}
    _write_result(results, "07_fig6_opacus_feasgm.json", {"dataset": "mnist", "error": None, "result": r})
    # C7 reproduced
    _write_result(results, "09_multiround_summary.json", {"claim": {"rdp": 0.104}, "figure7": {
        "26010": {"eps_upper_bound": 29.6}, "1485217": {"eps_upper_bound": 754.0}}})
    book = tmp_path / "book"
    book.mkdir()
    assert claims.main(["--book-md", str(book / "grade.md")]) == 0
    g = json.loads((results / "grade.json").read_text())
    by_json = {c["id"]: c["verdict"] for c in g["claims"]}
    assert by_json["C3"] == "not reproduced" and by_json["C6"] == "partly reproduced" and by_json["C7"] == "reproduced"
    md = (book / "grade.md").read_text()
    short = md.split("## In one sentence each")[1].split("## Details")[0]
    by_md = {}
    for line in short.splitlines():
        if line.startswith("- "):
            cid, rest = line[2:].split(" (", 1)[0], line.split("), ", 1)[1]
            by_md[cid] = next(v for v in sorted(claims.VERDICTS, key=len, reverse=True) if rest.startswith(v))
    text = claims.render_text(g)
    by_text = {}
    for line in text.splitlines():
        if line[:1] in "CX" and line[1:2].isdigit():  # C1..C8, and X1 (beyond the paper)
            cid, rest = line[:5].strip(), line[15:]
            by_text[cid] = next(v for v in sorted(claims.VERDICTS, key=len, reverse=True) if rest.startswith(v))
    app = appendix.render(book=True, notebooks_dir=ROOT / "notebooks")
    by_app = {}
    for line in app.split("### Major claims")[1].split("### Findings")[0].splitlines():
        cells = [x.strip() for x in line.strip("|").split("|")]
        if line[:3] in ("| C", "| X") and len(cells) == 4:
            by_app[cells[0]] = cells[2].split(" (")[0].removesuffix(" from committed data")
    ids = [c.id for c in claims.CLAIMS]
    assert list(by_json) == ids
    assert by_md == by_json and by_text == by_json and by_app == by_json
    # the same substitutions, in the same words, in all four (C6: inputs not recorded)
    c6 = next(c for c in g["claims"] if c["id"] == "C6")
    subs = [f["reason"] for f in c6["fidelity"]]
    assert subs and c6["reason"] == "substituted: " + "; ".join(subs)
    md_c6 = md.split(":::{dropdown} C6 (Fig. 6)")[1].split("\n:::\n")[0]
    app_c6 = app.split("- C6 (Fig. 6), ")[1].split("\n- C7")[0]
    text_c6 = text.split("\nC6 ")[1].split("\nC7 ")[0]
    for r in subs:
        assert claims.typeset(r) in md_c6.replace("\\", "") and "Differs from the paper's setting (" in app_c6
        assert all(f"    - {claims.typeset(x)}" in app_c6 for x in clauses(r))
        assert f"differs:  {claims.typeset(r)}" in text_c6
    sentence = claims.plain_sentence(c6)
    assert sentence in md_c6 and sentence in app_c6 and " ".join(sentence.split()[:6]) in text_c6
    assert "C3: not reproduced" in app.split("## Limitations")[1]


def _spread(results, name, trials, eps, point=None, **params):
    results.mkdir(parents=True, exist_ok=True)
    labels = list(eps)
    data = {"labels": labels, "seeds": [0, 1, 2], "eps": eps,
            "min": {k: min(v) for k, v in eps.items()}, "max": {k: max(v) for k, v in eps.items()},
            "range": {k: max(v) - min(v) for k, v in eps.items()}}
    p = {"common": {"trials": trials}, "point": point} if point else {"trials": trials, **params}
    (results / name).write_text(json.dumps({"params": p, "data": data}))


def test_expected_full_values_from_the_seed_spreads(results):
    _spread(results, "04_seed_spread.json", 400, {"optimal": [1.6, 1.9, 2.0]},
            point={"mechanism": "asgm", "q": 0.7, "N": 3, "n": 100})
    _spread(results, "07_seed_spread.json", 10_000, {"optimal": [2.9, 3.0, 3.1]}, implementation="opacus-1.0.2", q=0.5)
    _spread(results, "05_seed_spread.json", 400, {"optimal": [0.0, 0.3, 0.5]},
            point={"mechanism": "asgm", "q": 0.7, "N": 4, "n": 1})
    rows = {r["claim"]: r for r in appendix.expected_full_values(results)}
    assert set(rows) == {"C2", "C3", "C6"}
    # a spread that reaches 0 gives no floor (never "at least 0.00")
    assert rows["C3"]["expected"].startswith("No floor. The seeds gave 0.00 to 0.50 at 400 trials")
    # fewer trials than full mode: a floor (min - spread), since more trials raise eps_L
    assert rows["C2"]["expected"].startswith("ε_L at least 1.20. ") and rows["C2"]["full_trials"] == 10_000
    # the paper's trial count: the seeds' range widened by the spread
    assert rows["C6"]["expected"].startswith("ε_L within 2.70 to 3.30. ")
    text = appendix.render(book=True, notebooks_dir=ROOT / "notebooks", citation_file=ROOT / "CITATION.cff")
    sec = text.split("### Expected full-mode values")[1].split("### ")[0]
    assert "| C2 | mechanism = asgm, q = 0.7, N = 3, n = 100 | optimal (our addition) | 1.60 to 2.00 at 400 trials" in sec
    assert "normality[" not in sec  # distinguishers in words, never their internal keys


def test_badges_say_what_to_run_and_the_release_step(results):
    text = appendix.render(book=True, notebooks_dir=ROOT / "notebooks", citation_file=ROOT / "CITATION.cff")
    sec = text.split("### What to run for each badge")[1].split("### ")[0]
    for badge in ("Artifacts Available", "Artifacts Functional", "Results Reproduced"):
        assert f"**{badge}:**" in sec
    assert "`make test`" in sec and "`make all MODE=smoke`" in sec and "`make all MODE=full`" in sec
    cite = appendix.citation(ROOT / "CITATION.cff")
    if not cite["doi"]:  # unpublished: the placeholder says how it gets filled
        assert appendix.RELEASE_STEP in sec and "filled at release" in text
    assert "real-implementation steps (chapters 6, 7, 11): not estimated yet" in text  # no result yet


def test_expected_full_values_clamped_at_the_ceiling(results):
    """No expected ε_L above the largest 10,000 trials can certify (7.21), and never "a to a"."""
    from paperlib.artifact.grading.stats import ceiling

    top = ceiling({"trials": 10_000})
    assert f"{top:.2f}" == "7.21"
    _spread(results, "07_seed_spread.json", 10_000,
            {"optimal": [top - 0.0007, top, top], "normality[chi2,weighted]": [7.15, 6.74, 7.16]},
            implementation="opacus-1.0.2", q=0.5)
    rows = {r["label"]: r for r in appendix.expected_full_values(results)}
    assert rows["optimal"]["expected"].startswith("ε_L at the ceiling of 7.21, the largest 10,000 trials can certify. "
                                                  "The seeds gave 7.21, at the same trial count")
    norm = rows["normality[chi2,weighted]"]["expected"]
    assert norm == ("ε_L within 6.32 to 7.21. The seeds gave 6.74 to 7.16 at the same trial count as full mode; the "
                    "range is widened by their spread 0.42, then clamped at the ceiling of 7.21, the largest 10,000 "
                    "trials can certify.")
    sec = appendix.render(book=True, notebooks_dir=ROOT / "notebooks").split("### Expected full-mode values")[1]
    sec = sec.split("### ")[0]
    assert "| 7.21 at 10,000 trials (3 seeds) |" in sec
    assert not re.search(r"\b(\d+\.\d+) to \1\b", sec)


def test_appendix_typesets_claims_and_has_no_question_mark(results):
    text = appendix.render(book=True, notebooks_dir=ROOT / "notebooks", citation_file=ROOT / "CITATION.cff")
    for raw in ("eps_L", "eps\\_L", "n >=", "sigma =", "FEASGM eps ", " <= ", "delta ="):
        assert raw not in text, raw
    assert "ε\\_L above it" in text or "ε_L above it" in text
    assert "n ≥ 100" in text and "σ = 10" in text and "FEASGM ε above" in text
    assert "1.1x" not in text and "1.1 × the Opacus RDP claim" in text
    assert "?" not in text.split("## Limitations")[1].split("\n## ")[0]
    # a "?" only ends a question (a notebook's title), never stands for a missing value
    assert not re.search(r"(?<![A-Za-z])\?", text), re.findall(r".{30}(?<![A-Za-z])\?.{10}", text)


def test_the_root_artifact_appendix_is_a_current_snapshot():
    """ARTIFACT-APPENDIX.md at the repository's root is the PETS-form appendix of a real run (make
    appendix-snapshot): PETS's sections in order, every claim of the registry, and the mark of a snapshot."""
    text = (ROOT / "ARTIFACT-APPENDIX.md").read_text(encoding="utf-8")
    heads = [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^(#{2,4}) (.+?)\s*$", text, flags=re.M)]
    assert [h for h in heads if h in set(appendix.PETS_SECTIONS)] == list(appendix.PETS_SECTIONS)
    for c in claims.CLAIMS:
        head = f"#### Main Result {c.id if c.beyond_paper else c.id[1:]}: {claims.item_label(c)}"
        assert head in text, f"{c.id} missing: run make all, then make appendix-snapshot"
    assert "is a snapshot, taken at commit" in text and "cold quick run on" in text


def test_peak_memory_is_measured_over_the_process_tree(tmp_path):
    """runlog measure: a child that holds 300 MB (in a grandchild) is seen, and the command's status is kept."""
    import sys

    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import time; x = bytearray(300 * 2**20); time.sleep(2.5)']); sys.exit(3)")
    rc = runlog.measure_peak_memory([sys.executable, "-c", code], tmp_path / "peak.json", interval_s=0.5)
    peak = json.loads((tmp_path / "peak.json").read_text())["peak_memory_bytes"]
    assert rc == 3 and 250 * 2**20 <= peak <= 2 * 2**30, peak
    with pytest.raises(ValueError, match="cmd"):
        runlog.measure_peak_memory([], tmp_path / "x.json")
