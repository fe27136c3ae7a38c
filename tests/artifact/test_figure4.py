"""Which model each method of Figure 4 is audited with (:mod:`paperlib.artifact.figure4`)."""

from __future__ import annotations

import pytest

from paperlib.artifact import figure4


MODEL_OF = {"mnist": "cnn-mnist", "fmnist": "cnn-mnist", "cifar10": "cnn-cifar10"}
PAPER_MODEL_OF = {"DP-FETA": {"mnist": "dpfeta-mnist", "fmnist": "dpfeta-mnist"},
                  "PrivImage": {"mnist": "privimage-mnist", "fmnist": "privimage-mnist", "cifar10": "privimage-cifar10"}}
COMBINED = "DPSGD-HF / DP-FETA / PrivImage"


@pytest.mark.parametrize("panels", [(), ("mnist",), ("mnist", "fmnist"), ("mnist", "fmnist", "cifar10")])
def test_model_for_figure4(panels):
    """On a denoiser panel: DP-FETA/PrivImage on their own models for that panel (none: not audited),
    DPSGD-HF alone on the CNN, no combined row; elsewhere the combined row on the CNN stands for all
    three. DPSUR is on the CNN everywhere."""
    kw = {"model_of": MODEL_OF, "paper_model_of": PAPER_MODEL_OF, "paper_model_panels": panels}
    for panel, cnn in MODEL_OF.items():
        got = {m: figure4.model_for(panel, m, **kw) for m in (COMBINED, "DPSGD-HF", "DP-FETA", "PrivImage", "DPSUR")}
        if panel in panels:
            want = {COMBINED: None, "DPSGD-HF": cnn, "DP-FETA": "dpfeta-mnist" if panel != "cifar10" else None,
                    "PrivImage": "privimage-cifar10" if panel == "cifar10" else "privimage-mnist"}
        else:
            want = {COMBINED: cnn, "DPSGD-HF": None, "DP-FETA": None, "PrivImage": None}
        assert got == {**want, "DPSUR": cnn}, (panel, panels)
    with pytest.raises(ValueError, match=r"^panel must be one of mnist, fmnist, cifar10, got 'svhn'$"):
        figure4.model_for("svhn", "DPSUR", **kw)
    assert figure4.own_models(PAPER_MODEL_OF) == {"dpfeta-mnist", "privimage-mnist", "privimage-cifar10"}


def test_model_for_notebook_06_counts():
    """Notebook 06's own parameters, per mode: 22 audited points in quick and full mode (8 + 8 + 6: no DP-FETA
    model on CIFAR-10), 12 in smoke."""
    from paperlib.artifact.nbparams import notebook_params

    for mode, points in (("smoke", 12), ("quick", 22), ("full", 22)):
        p = notebook_params("06_audit_real_figure4", mode)
        kw = {"model_of": p["MODEL_OF"], "paper_model_of": p["PAPER_MODEL_OF"],
              "paper_model_panels": p["PAPER_MODEL_PANELS"]}
        got = [figure4.model_for(ds, label, **kw) for ds in p["DATASETS"] for label, _, _ in p["METHODS"]]
        assert sum(m is not None for m in got) == points, mode
