"""``make dist`` (:mod:`paperlib.artifact.dist`): a Zenodo upload built from one commit."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from paperlib.artifact import dist

ROOT = Path(__file__).resolve().parents[2]


def _repo(tmp_path: Path) -> Path:
    """A small git checkout with a pyproject version, .zenodo.json, a built book and an appendix."""
    r = tmp_path / "repo"
    r.mkdir()
    (r / "pyproject.toml").write_text('[project]\nname = "paperlib"\nversion = "9.8.7"\n')
    (r / ".zenodo.json").write_text(json.dumps({"title": "t", "version": "0", "notes": "An artifact."}))
    (r / "code.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-C", str(r), *args], check=True, capture_output=True)
    (r / "book" / "_build" / "html").mkdir(parents=True)
    (r / "book" / "_build" / "html" / "index.html").write_text("<html>book</html>")
    (r / "results").mkdir()
    (r / "results" / "ARTIFACT-APPENDIX.md").write_text("# Artifact Appendix\n")
    return r


def test_dist_builds_the_upload_from_the_commit(tmp_path):
    r = _repo(tmp_path)
    (r / "code.py").write_text("x = 2  # not committed\n")
    out = dist.build_dist(r)
    head = subprocess.run(["git", "-C", str(r), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    folder = Path(out["folder"])
    assert folder.name == f"paperlib-9.8.7-{head[:12]}" and out["commit"] == head
    assert out["notes"] and "uncommitted" in out["notes"][0]
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([".zenodo.json", "ARTIFACT-APPENDIX.md", "SHA256SUMS", f"{folder.name}-book.tar.gz",
                            f"{folder.name}-source.tar.gz"])
    with tarfile.open(folder / f"{folder.name}-source.tar.gz") as t:  # the commit's bytes, not the working tree's
        assert t.extractfile(f"{folder.name}/code.py").read() == b"x = 1\n"
    with tarfile.open(folder / f"{folder.name}-book.tar.gz") as t:
        assert f"{folder.name}-book/index.html" in t.getnames()
    meta = json.loads((folder / ".zenodo.json").read_text())
    assert meta["version"] == "9.8.7" and meta["notes"] == f"An artifact. Commit {head}."
    sums = dict(line.split()[::-1] for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == set(names) - {"SHA256SUMS"}
    for n, h in sums.items():
        assert hashlib.sha256((folder / n).read_bytes()).hexdigest() == h
    first = (folder / f"{folder.name}-source.tar.gz").read_bytes()
    dist.build_dist(r)  # the same commit: the same source archive, byte for byte
    assert (folder / f"{folder.name}-source.tar.gz").read_bytes() == first


def test_dist_refuses_what_is_missing_in_one_line(tmp_path):
    r = _repo(tmp_path)
    (r / "results" / "ARTIFACT-APPENDIX.md").unlink()
    with pytest.raises(dist.DistError, match=r"^appendix: .* is missing; run make all \(or make appendix\) first$"):
        dist.build_dist(r)
    (r / "book" / "_build" / "html" / "index.html").unlink()
    with pytest.raises(dist.DistError, match="^book_html: .* holds no built book"):
        dist.build_dist(r)
    plain = tmp_path / "plain"
    plain.mkdir()
    p = subprocess.run([sys.executable, "-m", "paperlib.artifact.dist", "--root", str(plain)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("make dist: root: ") and len(p.stderr.strip().splitlines()) == 1
