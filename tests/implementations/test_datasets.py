"""paperlib.implementations.datasets: loading through torchvision, offline errors, the bundled
real points (checksums, draw rule, damaged files, byte-exact rebuild), synthetic.

No test needs the network or /work/shared: the files are written into ``tmp_path`` in
torchvision's on-disk format. Every test runs with the download mirrors pointed at an
unreachable local address (``127.0.0.1:9``), so nothing can reach the internet.

CIFAR-10: torchvision checks the md5 of every batch file (``check_integrity`` in
``torchvision.datasets.cifar``), and generated files cannot have the original md5s. The
CIFAR-10 loading tests therefore monkeypatch only that integrity check (to "the file
exists"); one test shows that without the patch the generated files are rejected.
"""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

torchvision = pytest.importorskip("torchvision")
from torchvision import transforms  # noqa: E402

from paperlib.implementations import datasets as D  # noqa: E402
from paperlib.implementations.datasets import (  # noqa: E402
    DATASET_SHAPES,
    DatasetUnavailable,
    data_root,
    load_points,
)

UNREACHABLE = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    monkeypatch.setattr(torchvision.datasets.MNIST, "mirrors", [UNREACHABLE])
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "mirrors", [UNREACHABLE])
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", UNREACHABLE + "cifar-10-python.tar.gz")
    monkeypatch.delenv("PAPERLIB_DATA", raising=False)


# ------------------------------------------------------------------ file writers
def _write_idx_images(path: Path, images: np.ndarray) -> None:
    n, h, w = images.shape
    path.write_bytes(struct.pack(">IIII", 0x00000803, n, h, w) + images.astype(np.uint8).tobytes())


def _write_idx_labels(path: Path, labels: np.ndarray) -> None:
    path.write_bytes(struct.pack(">II", 0x00000801, len(labels)) + labels.astype(np.uint8).tobytes())


def _make_images(n: int, shape, seed: int) -> np.ndarray:
    """Random uint8 images whose first pixel is their index (so a loaded image says which it is)."""
    imgs = np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)
    imgs.reshape(n, -1)[:, 0] = np.arange(n)
    return imgs


def make_mnist_like(root: Path, folder: str, n_train: int = 30, n_test: int = 12):
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    out = {}
    for split, n, seed in (("train", n_train, 1), ("t10k", n_test, 2)):
        imgs = _make_images(n, (28, 28), seed)
        labels = (np.arange(n) * 7 + seed) % 10
        _write_idx_images(raw / f"{split}-images-idx3-ubyte", imgs)
        _write_idx_labels(raw / f"{split}-labels-idx1-ubyte", labels)
        out[split] = (imgs, labels)
    return out


def make_cifar_like(root: Path, per_batch: int = 6, n_test: int = 8):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    n_train = 5 * per_batch
    train = _make_images(n_train, (3, 32, 32), 3)  # CIFAR rows are channel-major 3x32x32
    train_labels = (np.arange(n_train) * 3) % 10
    test = _make_images(n_test, (3, 32, 32), 4)
    test_labels = (np.arange(n_test) * 3 + 1) % 10
    for b in range(5):
        sl = slice(b * per_batch, (b + 1) * per_batch)
        entry = {"batch_label": f"training batch {b + 1} of 5",
                 "data": train[sl].reshape(per_batch, 3072),
                 "labels": train_labels[sl].tolist(), "filenames": []}
        (folder / f"data_batch_{b + 1}").write_bytes(pickle.dumps(entry, protocol=2))
    entry = {"batch_label": "testing batch 1 of 1", "data": test.reshape(n_test, 3072),
             "labels": test_labels.tolist(), "filenames": []}
    (folder / "test_batch").write_bytes(pickle.dumps(entry, protocol=2))
    meta = {"num_cases_per_batch": per_batch, "num_vis": 3072,
            "label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                            "horse", "ship", "truck"]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return {"train": (train, train_labels), "test": (test, test_labels)}


@pytest.fixture
def cifar_integrity_patched(monkeypatch):
    """Replace only torchvision's CIFAR md5 check by 'the file exists'."""
    import torchvision.datasets.cifar as tv_cifar

    monkeypatch.setattr(tv_cifar, "check_integrity", lambda fpath, md5=None: os.path.isfile(fpath))


def _unnormalise(images: torch.Tensor, name: str) -> np.ndarray:
    mean, std = D.NORMALIZATION[name]
    m = torch.tensor(mean).view(1, -1, 1, 1)
    s = torch.tensor(std).view(1, -1, 1, 1)
    return torch.round((images * s + m) * 255).to(torch.int64).numpy()


def _check_against(images, labels, name, src_imgs, src_labels, k):
    """Each loaded point is one of the source points (found by its first pixel), exactly."""
    assert images.dtype == torch.float32 and labels.dtype == torch.int64
    assert tuple(images.shape) == (k, *DATASET_SHAPES[name]) and tuple(labels.shape) == (k,)
    pix = _unnormalise(images, name)
    idx = pix.reshape(k, -1)[:, 0]
    assert len(set(idx.tolist())) == k, "drawn with replacement"
    want = src_imgs[idx].reshape(k, *DATASET_SHAPES[name])
    np.testing.assert_array_equal(pix, want)
    np.testing.assert_array_equal(labels.numpy(), src_labels[idx])


# ------------------------------------------------------------------ tests
def test_dataset_shapes_and_normalization_constants():
    assert DATASET_SHAPES == {"mnist": (1, 28, 28), "fmnist": (1, 28, 28),
                              "cifar10": (3, 32, 32), "synthetic": (1, 28, 28)}
    for name, (mean, std) in D.NORMALIZATION.items():
        assert len(mean) == len(std) == DATASET_SHAPES[name][0]


def test_data_root_default_and_env(monkeypatch, tmp_path):
    root = data_root()
    assert root.name == "data"
    assert root.parent == Path(D.__file__).resolve().parents[2]  # <repo>/data for a checkout
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "elsewhere"))
    assert data_root() == tmp_path / "elsewhere"


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fmnist", "FashionMNIST")])
@pytest.mark.parametrize("train", [True, False])
def test_mnist_like_loads_through_torchvision(tmp_path, name, folder, train):
    src = make_mnist_like(tmp_path, folder)
    imgs, labels = src["train" if train else "t10k"]
    k = 9
    x, y = load_points(name, k, seed=5, root=tmp_path, train=train, download=False)
    _check_against(x, y, name, imgs, labels, k)
    # the whole split, in some order, without replacement
    n = len(labels)
    x, y = load_points(name, n, seed=0, root=tmp_path, train=train, download=False)
    _check_against(x, y, name, imgs, labels, n)


def test_root_from_env(tmp_path, monkeypatch):
    src = make_mnist_like(tmp_path, "MNIST")
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path))
    x, y = load_points("mnist", 4, seed=1, download=False)
    _check_against(x, y, "mnist", *src["train"], 4)


@pytest.mark.parametrize("name,folder", [("mnist", "MNIST"), ("fmnist", "FashionMNIST")])
def test_normalisation_equals_torchvision_transforms(tmp_path, name, folder):
    make_mnist_like(tmp_path, folder)
    x, _ = load_points(name, 30, seed=0, root=tmp_path, download=False)
    mean, std = D.NORMALIZATION[name]
    cls = torchvision.datasets.MNIST if name == "mnist" else torchvision.datasets.FashionMNIST
    ds = cls(str(tmp_path), train=True, download=False,
             transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)]))
    idx = np.random.default_rng(0).choice(len(ds), size=30, replace=False)
    ref = torch.stack([ds[int(i)][0] for i in idx])
    torch.testing.assert_close(x, ref, rtol=0, atol=1e-6)


def test_seeded_draw(tmp_path):
    make_mnist_like(tmp_path, "MNIST")
    a = load_points("mnist", 10, seed=3, root=tmp_path, download=False)
    b = load_points("mnist", 10, seed=3, root=tmp_path, download=False)
    c = load_points("mnist", 10, seed=4, root=tmp_path, download=False)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_k_larger_than_dataset(tmp_path):
    make_mnist_like(tmp_path, "MNIST", n_train=30)
    load_points("mnist", 30, root=tmp_path, download=False)
    with pytest.raises(ValueError, match=r"^k: 31 is larger than the dataset"):
        load_points("mnist", 31, root=tmp_path, download=False)


@pytest.mark.parametrize("kwargs,param", [
    (dict(name="imagenet", k=3), "name"),
    (dict(name=3, k=3), "name"),
    (dict(name="mnist", k=0), "k"),
    (dict(name="mnist", k=-2), "k"),
    (dict(name="mnist", k=2.5), "k"),
    (dict(name="mnist", k=True), "k"),
    (dict(name="mnist", k=2, seed=-1), "seed"),
])
def test_bad_arguments_name_the_parameter(tmp_path, kwargs, param):
    with pytest.raises(ValueError, match=rf"^{param}:"):
        load_points(root=tmp_path, download=False, **kwargs)


@pytest.mark.parametrize("train", [True, False])
def test_cifar10_loads_with_integrity_check_patched(tmp_path, cifar_integrity_patched, train):
    src = make_cifar_like(tmp_path)
    imgs, labels = src["train" if train else "test"]
    k = 7
    x, y = load_points("cifar10", k, seed=2, root=tmp_path, train=train, download=False)
    _check_against(x, y, "cifar10", imgs, labels, k)
    # and equals torchvision's per-item ToTensor + Normalize
    mean, std = D.NORMALIZATION["cifar10"]
    ds = torchvision.datasets.CIFAR10(
        str(tmp_path), train=train, download=False,
        transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)]))
    idx = np.random.default_rng(2).choice(len(ds), size=k, replace=False)
    torch.testing.assert_close(x, torch.stack([ds[int(i)][0] for i in idx]), rtol=0, atol=1e-6)


def test_cifar10_generated_files_fail_the_real_md5_check(tmp_path):
    make_cifar_like(tmp_path)
    with pytest.raises(DatasetUnavailable, match="cifar-10-batches-py"):
        load_points("cifar10", 3, root=tmp_path, download=False)


_EXPECT = {
    "mnist": ("MNIST/raw", "train-images-idx3-ubyte"),
    "fmnist": ("FashionMNIST/raw", "train-images-idx3-ubyte"),
    "cifar10": ("cifar-10-batches-py", "data_batch_1"),
}


def _check_message(err: DatasetUnavailable, name: str, root: Path):
    msg = str(err)
    folder, file = _EXPECT[name]
    assert len(msg.splitlines()) <= 2
    assert str(root / folder) in msg and file in msg and "PAPERLIB_DATA" in msg
    # no torchvision traceback chained to it
    assert err.__cause__ is None and err.__suppress_context__


@pytest.mark.parametrize("name", ["mnist", "fmnist", "cifar10"])
def test_offline_download_raises_dataset_unavailable(tmp_path, name):
    root = tmp_path / "empty"
    with pytest.raises(DatasetUnavailable) as info:
        load_points(name, 5, root=root, download=True)
    _check_message(info.value, name, root)
    assert "could not be downloaded" in str(info.value)
    assert info.value.cause is not None


@pytest.mark.parametrize("name", ["mnist", "fmnist", "cifar10"])
def test_download_off_raises_without_network(tmp_path, monkeypatch, name):
    import urllib.request

    def no_network(*a, **k):
        raise AssertionError("network used with download=False")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    with pytest.raises(DatasetUnavailable) as info:
        load_points(name, 5, root=tmp_path, download=False)
    _check_message(info.value, name, tmp_path)
    assert "download=False" in str(info.value)


def test_synthetic_is_deterministic_and_needs_no_files(tmp_path):
    x1, y1 = load_points("synthetic", 16, seed=7, root=tmp_path / "nothing", download=False)
    x2, y2 = load_points("synthetic", 16, seed=7)
    x3, y3 = load_points("synthetic", 16, seed=8)
    assert x1.shape == (16, 1, 28, 28) and x1.dtype == torch.float32
    assert y1.shape == (16,) and y1.dtype == torch.int64
    assert int(y1.min()) >= 0 and int(y1.max()) <= 9
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)
    # uniform pixels in [0, 1], normalised with MNIST's constants
    mean, std = D.NORMALIZATION["synthetic"]
    px = x1 * std[0] + mean[0]
    assert float(px.min()) >= -1e-6 and float(px.max()) <= 1 + 1e-6
    assert not (tmp_path / "nothing").exists()


# ------------------------------------------------------------------ real sample data
def _shared_data() -> Path | None:
    repo = Path(D.__file__).resolve().parents[2]
    for cand in (Path("/work/shared/data"), repo.parent / "shared" / "data"):
        if (cand / "mnist_sample.npz").is_file():
            return cand
    return None


SHARED = _shared_data()


@pytest.mark.skipif(SHARED is None, reason="no shared/data folder with the real MNIST/FMNIST samples")
@pytest.mark.parametrize("name,npz,img_key,label_key", [
    ("mnist", "mnist_sample.npz", "train_images", "train_labels"),  # 100 real training images
    ("fmnist", "fashion_mnist_sample.npz", "images", "labels"),     # train = copy of test
])
def test_real_sample_images(name, npz, img_key, label_key):
    x, y = load_points(name, 5, root=SHARED, download=False)
    assert x.shape == (5, 1, 28, 28)
    ref = np.load(SHARED / npz, allow_pickle=False)
    pool = ref[img_key].reshape(len(ref[img_key]), -1).astype(np.int64)
    pix = _unnormalise(x, name).reshape(5, -1)
    for p, label in zip(pix, y.tolist()):
        hits = np.flatnonzero((pool == p).all(axis=1))
        assert hits.size >= 1, "loaded image is not one of the sample images"
        assert label in set(ref[label_key][hits].tolist())
    assert float(pix.std()) > 20  # real digits/garments, not blank images


def test_resolve_dataset_never_falls_back_to_synthetic(tmp_path, monkeypatch):
    """An empty data folder (a fresh clone, offline): the bundled real points, in every mode
    that does not download; the synthetic stand-in only by name."""
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    for name in ("mnist", "fmnist", "cifar10"):
        assert D.resolve_dataset(name, 5, 0, mode="quick") == (name, None, D.SOURCE_BUNDLED)
    assert D.resolve_dataset("synthetic", 5, 0) == ("synthetic", None, D.SOURCE_SYNTHETIC)


def test_resolve_dataset_uses_the_data_folder(tmp_path, monkeypatch):
    make_mnist_like(tmp_path, "MNIST")
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path))
    # 30 images are not the 60,000 of the official split: a sample, and said so
    assert D.resolve_dataset("mnist", 5, 0) == ("mnist", tmp_path.resolve(), D.SOURCE_FOLDER_SAMPLE)
    monkeypatch.setattr(D, "FULL_TRAIN_SIZE", dict(D.FULL_TRAIN_SIZE, mnist=30))
    assert D.resolve_dataset("mnist", 5, 0) == ("mnist", tmp_path.resolve(), D.SOURCE_FULL)


# ------------------------------------------------------------------ the bundled real points
BUNDLE_NAMES = ("mnist", "fmnist", "cifar10")


def test_bundle_checksums_and_contents():
    folder = D.bundle_dir()
    sums = dict(line.split()[::-1] for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"mnist.npz", "fmnist.npz", "cifar10.npz"}
    assert sums == D.BUNDLE_SHA256  # the file beside the data repeats the hashes held in the code
    import hashlib

    for f, h in D.BUNDLE_SHA256.items():
        assert hashlib.sha256((folder / f).read_bytes()).hexdigest() == h
    assert (folder / "README.md").is_file()
    for name in BUNDLE_NAMES:
        b = D.bundle_info(name)
        assert b["sha256"] == sums[b["file"]] and b["split"] == {"mnist": "train"}.get(name, "test")
        assert len(b["labels"]) == D.BUNDLE_SIZE >= 5
        assert b["pixels"].dtype == np.uint8 and float(b["pixels"].std()) > 20  # real images, not blank
        assert len(set(b["indices"].tolist())) == D.BUNDLE_SIZE
        assert set(b["labels"].tolist()) <= set(range(10))
        with np.load(folder / b["file"], allow_pickle=False) as z:  # no pickle needed
            assert set(z.files) == {"pixels", "labels", "indices", "split"}


def test_bundled_points_draw_like_the_full_dataset_and_differ_between_datasets():
    pts = {}
    for name in BUNDLE_NAMES:
        X, y, info = D.load_bundled(name, 5, seed=0)
        assert tuple(X.shape) == (5, *DATASET_SHAPES[name]) and X.dtype == torch.float32 and y.dtype == torch.int64
        b = D.bundle_info(name)
        sel = np.random.default_rng(0).choice(D.BUNDLE_SIZE, 5, replace=False)  # the rule of load_points
        assert info["indices"] == b["indices"][sel].tolist()
        np.testing.assert_array_equal(y.numpy(), b["labels"][sel])
        np.testing.assert_array_equal(_unnormalise(X, name).reshape(5, -1) if name != "cifar10" else
                                      _unnormalise(X, name).transpose(0, 2, 3, 1).reshape(5, -1),
                                      b["pixels"][sel].reshape(5, -1).astype(np.int64))
        pts[name] = X
        assert not torch.equal(X, D.load_bundled(name, 5, seed=1)[0])  # another seed, other points
    assert not torch.equal(pts["mnist"], pts["fmnist"])  # the panels of Figure 4 cannot coincide
    assert not torch.equal(pts["mnist"][:, :1, :28, :28], pts["cifar10"][:, :1, :28, :28])
    with pytest.raises(ValueError, match="^k: 11 is larger than the 10 bundled"):
        D.load_bundled("mnist", 11)


def test_damaged_bundle_is_one_line_naming_the_file(tmp_path):
    import shutil

    folder = tmp_path / "points"
    shutil.copytree(D.bundle_dir(), folder)
    raw = bytearray((folder / "fmnist.npz").read_bytes())
    raw[-200] ^= 0xFF
    (folder / "fmnist.npz").write_bytes(bytes(raw))
    with pytest.raises(DatasetUnavailable) as info:
        D.load_bundled("fmnist", 5, folder=folder)
    msg = str(info.value)
    assert "\n" not in msg and str(folder / "fmnist.npz") in msg and "sha256" in msg
    D.load_bundled("mnist", 5, folder=folder)  # the others still load
    (folder / "mnist.npz").unlink()
    with pytest.raises(DatasetUnavailable, match="is missing"):
        D.load_bundled("mnist", 5, folder=folder)


def test_damaged_bundle_stops_resolve_dataset(tmp_path, monkeypatch):
    import shutil

    folder = tmp_path / "points"
    shutil.copytree(D.bundle_dir(), folder)
    (folder / "cifar10.npz").write_bytes(b"not a zip")
    monkeypatch.setattr(D, "bundle_dir", lambda: folder)
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "empty"))
    with pytest.raises(DatasetUnavailable) as info:
        D.resolve_dataset("cifar10", 5, 0)
    assert "\n" not in str(info.value) and "cifar10.npz" in str(info.value)


@pytest.mark.skipif(SHARED is None or not (SHARED / "cifar10_sample.npz").is_file(),
                    reason="no ../shared/data with the real samples")
def test_bundle_regenerates_byte_for_byte(tmp_path):
    assert D.build_bundle(SHARED, tmp_path) == D.BUNDLE_SHA256
    for f in ("mnist.npz", "fmnist.npz", "cifar10.npz", "SHA256SUMS"):
        assert (tmp_path / f).read_bytes() == (D.bundle_dir() / f).read_bytes(), f


@pytest.mark.skipif(SHARED is None or not (SHARED / "cifar10_sample.npz").is_file(),
                    reason="no ../shared/data with the real samples")
def test_bundle_points_are_the_sample_images_at_their_indices():
    srcs = {"mnist": "mnist_sample.npz", "fmnist": "fashion_mnist_sample.npz", "cifar10": "cifar10_sample.npz"}
    for name, f in srcs.items():
        b = D.bundle_info(name)
        pre = "train_" if b["split"] == "train" else ""
        with np.load(SHARED / f, allow_pickle=False) as z:
            pos = np.searchsorted(z[f"{pre or 'test_'}indices"], b["indices"])
            np.testing.assert_array_equal(z[f"{pre}images"][pos], b["pixels"])
            np.testing.assert_array_equal(z[f"{pre}labels"][pos], b["labels"])


def test_mnist_bundle_holds_official_training_images():
    """Issue 34: MNIST's bundled points are training images, as the paper's audits drew them: the bytes at
    their indices of the official training files (idx format, read here without paperlib's reader)."""
    raw = SHARED / "MNIST" / "raw"
    if not (raw / "train-images-idx3-ubyte").is_file():
        pytest.skip("no MNIST training files beside the repository (../shared/data/MNIST/raw)")
    img = np.frombuffer((raw / "train-images-idx3-ubyte").read_bytes()[16:], dtype=np.uint8).reshape(-1, 28, 28)
    lab = np.frombuffer((raw / "train-labels-idx1-ubyte").read_bytes()[8:], dtype=np.uint8)
    b = D.bundle_info("mnist")
    assert b["split"] == "train" and int(b["indices"].max()) < len(lab)
    np.testing.assert_array_equal(img[b["indices"]], b["pixels"])
    np.testing.assert_array_equal(lab[b["indices"]], b["labels"])


# ------------------------------------------------------------------ resolve_points: used as given or refused
def test_resolve_points_says_which_points_and_why(tmp_path, monkeypatch):
    make_mnist_like(tmp_path / "mine", "MNIST")
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "mine"))
    c = D.resolve_points("mnist", 5, 3)
    assert (c.dataset, c.root, c.source) == ("mnist", (tmp_path / "mine").resolve(), D.SOURCE_FOLDER_SAMPLE)
    assert c.note == (f"5 points drawn with seed 3 from the MNIST training split in {(tmp_path / 'mine').resolve()} "
                      "($PAPERLIB_DATA; 30 images, not the full 60,000)")
    assert D.resolve_dataset("mnist", 5, 3) == tuple(c)[:3]
    # the dataset absent there (Fashion-MNIST), an extra folder absent too: the bundle, and why
    c = D.resolve_points("fmnist", 5, 0, extra_roots=[tmp_path / "other"])
    assert c.source == D.SOURCE_BUNDLED and c.root is None
    assert c.note == (f"5 of the 10 real Fashion-MNIST test points bundled with paperlib (sha256 checked): no "
                      f"Fashion-MNIST dataset in {tmp_path / 'mine'} ($PAPERLIB_DATA); nor in {tmp_path / 'other'} "
                      "(an extra data folder, which does not exist)")
    assert D.resolve_points("synthetic", 5).source == D.SOURCE_SYNTHETIC
    # the note names the bundle's own split: MNIST's bundled points are training images (the detail line agrees)
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "none"))
    c = D.resolve_points("mnist", 5, 0)
    assert c.source == D.SOURCE_BUNDLED and "real MNIST training points bundled" in c.note
    assert D.load_bundled("mnist", 5, 0)[2]["split"] == "train"


def test_resolve_points_extra_folder_is_used_and_a_broken_one_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "empty"))
    make_mnist_like(tmp_path / "extra", "MNIST")
    c = D.resolve_points("mnist", 4, 0, extra_roots=[tmp_path / "nothing", tmp_path / "extra"])
    assert c.root == (tmp_path / "extra").resolve() and "an extra data folder" in c.note
    raw = tmp_path / "extra" / "MNIST" / "raw"
    (raw / "train-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01")
    with pytest.raises(DatasetUnavailable, match="too short") as info:
        D.resolve_points("mnist", 4, 0, extra_roots=[tmp_path / "extra"])
    assert "\n" not in str(info.value) and str(raw / "train-labels-idx1-ubyte") in str(info.value)


def test_gzipped_mnist_files_unpack_in_full_mode_only(tmp_path, monkeypatch):
    """A folder holding only the four original .gz files: full mode lets torchvision check and
    unpack them (offline); quick mode (no download) names the missing un-gzipped file."""
    import gzip

    src = make_mnist_like(tmp_path / "gz", "MNIST")
    raw = tmp_path / "gz" / "MNIST" / "raw"
    for f in list(raw.iterdir()):
        (raw / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    monkeypatch.setenv("PAPERLIB_DATA", str(tmp_path / "gz"))
    with pytest.raises(DatasetUnavailable, match="train-images-idx3-ubyte is missing"):
        D.resolve_points("mnist", 5, 0, mode="quick")
    # these .gz files cannot have the originals' md5s: refused, never downloaded over (the
    # network is off here anyway), never replaced by the bundle
    with pytest.raises(DatasetUnavailable, match="train-images-idx3-ubyte.gz does not have the original file's md5"):
        D.resolve_points("mnist", 5, 0, mode="full")
    # with the md5 check patched to "the file exists", they unpack and load
    import torchvision.datasets.utils as tv_utils

    monkeypatch.setattr(tv_utils, "check_integrity", lambda fpath, md5=None: os.path.isfile(fpath))
    c = D.resolve_points("mnist", 5, 0, mode="full")
    assert c.source == D.SOURCE_FOLDER_SAMPLE and (raw / "train-images-idx3-ubyte").is_file()
    x, y = load_points("mnist", 5, 0, root=tmp_path / "gz", download=False)
    _check_against(x, y, "mnist", *src["train"], 5)


def test_load_points_refuses_strings_for_booleans(tmp_path):
    for kw in (dict(train="no"), dict(download="false"), dict(train=1), dict(download=None)):
        with pytest.raises(TypeError, match=rf"^{next(iter(kw))}: must be True or False"):
            load_points("mnist", 3, root=tmp_path, **kw)
