"""sweeps.audit_point runs one point of audit_sweep alone, with the same rounds."""


def test_audit_point_is_the_sweeps_point(tmp_path, monkeypatch):
    from paperlib.artifact import sweeps

    monkeypatch.setenv("PAPERLIB_RESULTS", str(tmp_path))
    points = [{"mechanism": "easgm", "N": 2, "n": 10, "q": 0.5}, {"mechanism": "asgm", "N": 3, "n": 10, "q": 0.7}]
    common = {"sigma": 2.0, "C": 1.0, "trials": 1_000, "delta": 1e-5, "distinguishers": ["optimal", "normality"]}
    sweep = sweeps.audit_sweep("t_spread_sweep", points, seed=5, mode="smoke", progress=False, **common)
    for i, p in enumerate(points):
        alone = sweeps.audit_point(p, index=i, seed=5, **common)
        for lab, r in sweep[i]["results"].items():  # the same rounds: the same counts and eps_L
            assert {k: alone[lab][k] for k in ("fpr", "fnr", "eps_lower")} == \
                {k: r[k] for k in ("fpr", "fnr", "eps_lower")}
    other = sweeps.audit_point(points[1], index=1, seed=6, **common)
    assert other["optimal"]["fpr"] != sweep[1]["results"]["optimal"]["fpr"] or \
        other["optimal"]["fnr"] != sweep[1]["results"]["optimal"]["fnr"]
