"""Real image datasets for the audits: MNIST, Fashion-MNIST, CIFAR-10 (and a synthetic stand-in).

:func:`load_points` returns ``k`` seeded random points of a dataset as the tensors a model
takes: images ``float32 [k, C, H, W]`` and labels ``int64 [k]``. The files are read with
torchvision's own dataset classes (:class:`torchvision.datasets.MNIST`,
:class:`~torchvision.datasets.FashionMNIST`, :class:`~torchvision.datasets.CIFAR10`), in
torchvision's on-disk layout under :func:`data_root`:

.. code-block:: text

    <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte         (all four files)
    <root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte  (all four files)
    <root>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}  (md5-checked)

``<root>`` is the ``root=`` argument, else ``$PAPERLIB_DATA``, else ``<repo>/data/``
(git-ignored). Missing files are downloaded on first use (``download=True``); when they are
missing and cannot be downloaded (offline, or ``download=False``) :class:`DatasetUnavailable`
says in two lines what to put where. No torchvision traceback is chained to it; the
original error is kept as its ``cause`` attribute.

What is verified (read from torchvision 0.29's ``datasets/mnist.py``, ``cifar.py`` and
``utils.py``):

* downloads: torchvision checks the md5 of every file it downloads
  (``download_and_extract_archive(..., md5=...)``: MNIST's and Fashion-MNIST's four
  ``.gz`` files, CIFAR-10's ``.tar.gz``) and raises on a mismatch;
* CIFAR-10 on disk: torchvision checks the md5 of every batch file and of
  ``batches.meta`` on every load, before it unpickles them;
* MNIST / Fashion-MNIST on disk: torchvision checks only that the four un-gzipped files
  exist (it has no checksum of them). Here each idx file's header is checked against
  its size (magic number, dimensions, no truncated or trailing bytes), the label file
  must hold as many labels as the image file holds images, and (every dataset) every
  label must be a class 0-9. A file that fails raises :class:`DatasetUnavailable` whose
  first line names the file.

Normalisation (:data:`NORMALIZATION`): ``ToTensor`` (pixels / 255 in ``[0, 1]``, channels
first) then ``Normalize(mean, std)`` with each dataset's usual training-set statistics:

* MNIST: mean 0.1307, std 0.3081;
* Fashion-MNIST: mean 0.2860, std 0.3530;
* CIFAR-10: mean (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616) per channel -- the
  true per-channel standard deviations of the training set. (Opacus's CIFAR-10 example
  uses (0.2023, 0.1994, 0.2010); Tramer & Boneh's code uses ImageNet's statistics for
  CIFAR-10 and no normalisation for MNIST/FMNIST. The audits fix the inputs, so the
  choice changes the gradients but not the mechanism.)

The conversion is done on the whole selection at once; it equals torchvision's
``Compose([ToTensor(), Normalize(mean, std)])`` applied item by item
(``tests/test_datasets.py`` checks this).

``"synthetic"`` needs no files: uniform random pixels in ``[0, 1]`` of MNIST's shape,
normalised with MNIST's constants, and uniform random labels 0-9, both from ``seed``.
"""

from __future__ import annotations

import math
import operator
import os
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "DATASET_SHAPES",
    "DATASETS",
    "NORMALIZATION",
    "DatasetUnavailable",
    "data_root",
    "load_points",
    "resolve_dataset",
    "SOURCE_FULL",
    "SOURCE_BUNDLED",
    "SOURCE_SYNTHETIC",
    "BUNDLE_SIZE",
    "DATASET_TITLES",
    "bundle_dir",
    "bundle_info",
    "load_bundled",
    "build_bundle",
    "describe_points",
]

#: Input shape ``(C, H, W)`` of each dataset's images.
DATASET_SHAPES: dict[str, tuple[int, int, int]] = {
    "mnist": (1, 28, 28),
    "fmnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "synthetic": (1, 28, 28),
}

#: The accepted values of ``name``.
DATASETS: tuple[str, ...] = tuple(DATASET_SHAPES)

#: ``(mean, std)`` per channel, applied after ``ToTensor`` (see the module docstring).
NORMALIZATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fmnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "synthetic": ((0.1307,), (0.3081,)),
}

ENV_VAR = "PAPERLIB_DATA"

# What DatasetUnavailable tells the user to fetch, per dataset: (torchvision class name,
# folder under root, files, where to get them).
_MNIST_FILES = ("train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte")
_SOURCES = {
    "mnist": ("MNIST", "MNIST/raw", _MNIST_FILES + " (all four, un-gzipped)",
              "https://ossci-datasets.s3.amazonaws.com/mnist/"),
    "fmnist": ("FashionMNIST", "FashionMNIST/raw", _MNIST_FILES + " (all four, un-gzipped)",
               "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"),
    "cifar10": ("CIFAR10", "cifar-10-batches-py",
                "data_batch_1..data_batch_5, test_batch, batches.meta "
                "(the original files: their md5s are checked)",
                "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, unpacked"),
}


_IDX_MAGIC = {"images": 0x00000803, "labels": 0x00000801}  # unsigned bytes, 3 resp. 1 dimensions
_IDX_SPLIT = {True: "train", False: "t10k"}


class DatasetUnavailable(RuntimeError):
    """A dataset's files are missing and could not be (or were not allowed to be) downloaded.

    The message says which files to put in which folder and how to point
    ``$PAPERLIB_DATA`` at another folder. ``cause`` holds the underlying error, if any.
    """

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


def _repo_root() -> Path | None:
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() and (here / "paperlib").is_dir() else None


def data_root() -> Path:
    """The folder that holds the datasets (torchvision's ``root``).

    ``$PAPERLIB_DATA`` if set and non-empty; else ``<repo>/data`` for a source checkout
    (editable install); else, for a plain installed package, ``$XDG_CACHE_HOME/paperlib/data``
    (``~/.cache/paperlib/data``). The folder need not exist yet.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    repo = _repo_root()
    if repo is not None:
        return repo / "data"
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "paperlib" / "data"


def _check_args(name, k, seed) -> tuple[str, int, int]:
    if not isinstance(name, str) or name.strip().lower() not in DATASET_SHAPES:
        raise ValueError(f"name: unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    if isinstance(k, bool):
        raise ValueError(f"k: must be an integer >= 1, got {k!r}")
    try:
        k = operator.index(k)
    except TypeError:
        raise ValueError(f"k: must be an integer >= 1, got {k!r}") from None
    if k < 1:
        raise ValueError(f"k: must be >= 1, got {k}")
    if isinstance(seed, bool):
        raise ValueError(f"seed: must be a non-negative integer, got {seed!r}")
    try:
        seed = operator.index(seed)
    except TypeError:
        raise ValueError(f"seed: must be a non-negative integer, got {seed!r}") from None
    if seed < 0:
        raise ValueError(f"seed: must be a non-negative integer, got {seed}")
    return name.strip().lower(), k, seed


def _normalise(pixels_nchw_uint8: torch.Tensor, name: str) -> torch.Tensor:
    """ToTensor + Normalize on a uint8 batch ``[k, C, H, W]``."""
    mean, std = NORMALIZATION[name]
    x = pixels_nchw_uint8.to(torch.float32).div_(255.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return x.sub_(m).div_(s).contiguous()


def _unavailable(name: str, root: Path, train: bool, download: bool,
                 err: BaseException | None) -> DatasetUnavailable:
    _, folder, files, url = _SOURCES[name]
    split = "train" if train else "test"
    detail = " ".join(str(err).split()) if err is not None else ""
    if len(detail) > 160:
        detail = detail[:157] + "..."
    if download:
        why = f"could not be downloaded ({type(err).__name__}: {detail})"
    else:
        why = "is missing or incomplete, and download=False"
        if detail:
            why += f" (torchvision: {detail})"
    msg = (f"Dataset {name!r} ({split} split) is not available in {root} and {why}.\n"
           f"Put {files} into {root / folder}/ (from {url}), or set {ENV_VAR} to the folder "
           f"that holds {folder.split('/')[0]}/ in this layout (now {root}).")
    return DatasetUnavailable(msg, cause=err)


def _idx_paths(name: str, root: Path, train: bool) -> dict[str, Path]:
    folder = root / _SOURCES[name][1]
    split = _IDX_SPLIT[bool(train)]
    return {kind: folder / f"{split}-{kind}-idx{1 if kind == 'labels' else 3}-ubyte" for kind in ("images", "labels")}


def _corrupt(name: str, train: bool, path, why: str) -> DatasetUnavailable:
    split = "train" if train else "test"
    _, folder, _, url = _SOURCES[name]
    return DatasetUnavailable(
        f"Dataset {name!r} ({split} split): {path} {why}.\n"
        f"Replace it with the original file (from {url}), or set {ENV_VAR} to a folder holding "
        f"{folder.split('/')[0]}/ with the original files.")


def _check_idx_files(name: str, root: Path, train: bool) -> None:
    """MNIST-like idx files that exist: header against size, and images/labels counts agree.

    torchvision has no checksum of the un-gzipped files and reads them with ``strict=False``
    (a short label file loads, and fails later as an index error). Missing files are left
    to torchvision (download, or its "not found").
    """
    paths = _idx_paths(name, root, train)
    counts = {}
    for kind, path in paths.items():
        if not path.is_file():
            return
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(16 if kind == "images" else 8)
        want_len = 16 if kind == "images" else 8
        if len(head) < want_len:
            raise _corrupt(name, train, path, f"is too short for an idx {kind} header ({size} bytes)")
        magic = int.from_bytes(head[:4], "big")
        if magic != _IDX_MAGIC[kind]:
            raise _corrupt(name, train, path, f"is not an idx {kind} file (magic number {magic:#010x}, expected "
                           f"{_IDX_MAGIC[kind]:#010x})")
        dims = [int.from_bytes(head[i:i + 4], "big") for i in range(4, want_len, 4)]
        if kind == "images" and tuple(dims[1:]) != DATASET_SHAPES[name][1:]:
            raise _corrupt(name, train, path, f"holds images of {dims[1]} x {dims[2]} pixels, expected "
                           f"{DATASET_SHAPES[name][1]} x {DATASET_SHAPES[name][2]}")
        expected = want_len + math.prod(dims)
        if size != expected:
            raise _corrupt(name, train, path, f"has {size:,} bytes but its header announces {dims[0]:,} {kind} "
                           f"({expected:,} bytes): truncated or corrupt")
        counts[kind] = dims[0]
    if counts["labels"] != counts["images"]:
        raise _corrupt(name, train, paths["labels"], f"holds {counts['labels']:,} labels but "
                       f"{paths['images'].name} holds {counts['images']:,} images")


def _check_loaded(name: str, root: Path, train: bool, n_images: int, targets) -> np.ndarray:
    """Labels as loaded: one per image, each a class 0-9 (else DatasetUnavailable naming the file)."""
    labels = np.asarray(targets)
    where = (_idx_paths(name, root, train)["labels"] if name in ("mnist", "fmnist")
             else root / _SOURCES[name][1])
    if labels.ndim != 1 or labels.shape[0] != n_images:
        raise _corrupt(name, train, where, f"gives {labels.shape[0] if labels.ndim else 0:,} labels for "
                       f"{n_images:,} images")
    if labels.size and (not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() > 9):
        bad = labels[(labels < 0) | (labels > 9)] if np.issubdtype(labels.dtype, np.number) else labels
        raise _corrupt(name, train, where, f"holds a label {np.asarray(bad).ravel()[0].item()!r} outside the classes 0-9")
    return labels


def _load_torchvision(name: str, root: Path, train: bool, download: bool):
    """The torchvision dataset object, or DatasetUnavailable."""
    try:
        from torchvision import datasets as tvd
    except ImportError as err:  # pragma: no cover - torchvision is a dependency
        raise DatasetUnavailable(
            f"Dataset {name!r} needs torchvision, which cannot be imported ({err}).\n"
            "Install it: pip install -r requirements-lock.txt (or pip install torchvision).",
            cause=err) from None
    cls = {"mnist": tvd.MNIST, "fmnist": tvd.FashionMNIST, "cifar10": tvd.CIFAR10}[name]
    if name in ("mnist", "fmnist"):
        _check_idx_files(name, root, train)
    try:
        return cls(str(root), train=train, download=download)
    except Exception as err:  # network, md5, missing file, corrupt pickle/idx, permissions
        raise _unavailable(name, root, train, download, err) from None


def _synthetic(k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    pixels = torch.rand((k, *DATASET_SHAPES["synthetic"]), generator=g, dtype=torch.float32)
    labels = torch.randint(0, 10, (k,), generator=g, dtype=torch.int64)
    mean, std = NORMALIZATION["synthetic"]
    return ((pixels - mean[0]) / std[0]).contiguous(), labels


def load_points(name: str, k: int, seed: int = 0, *, root: str | os.PathLike | None = None,
                train: bool = True, download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` random points of dataset ``name``, drawn without replacement with ``seed``.

    Parameters
    ----------
    name : ``"mnist"``, ``"fmnist"``, ``"cifar10"`` or ``"synthetic"`` (case-insensitive).
    k : number of points, ``1 <= k <= len(dataset)`` (the size of the chosen split in
        ``root``).
    seed : the draw is ``numpy.random.default_rng(seed).choice(len(dataset), k,
        replace=False)`` (in that order, not sorted); for ``"synthetic"`` it seeds a
        ``torch.Generator``.
    root : the datasets folder (default :func:`data_root`).
    train : the training split (default) or the test split.
    download : download missing files into ``root`` (torchvision's downloader).

    Returns
    -------
    images : ``torch.float32`` ``[k, C, H, W]`` (``C, H, W = DATASET_SHAPES[name]``),
        normalised as in :data:`NORMALIZATION`.
    labels : ``torch.int64`` ``[k]``, class indices 0-9.

    Raises
    ------
    ValueError
        naming the parameter: unknown ``name``, ``k < 1``, ``k`` larger than the dataset,
        negative ``seed``.
    DatasetUnavailable
        the files are missing and could not be downloaded (or ``download=False``), or a
        file fails the checks of the module docstring (first line names the file).
    """
    name, k, seed = _check_args(name, k, seed)
    if name == "synthetic":
        return _synthetic(k, seed)
    root_path = Path(root).expanduser() if root is not None else data_root()
    ds = _load_torchvision(name, root_path, bool(train), bool(download))
    n = len(ds)
    if k > n:
        split = "train" if train else "test"
        raise ValueError(f"k: {k} is larger than the dataset ({name} {split} split in "
                         f"{root_path} has {n} images)")
    all_labels = _check_loaded(name, root_path, bool(train), n, ds.targets)
    idx = np.random.default_rng(seed).choice(n, size=k, replace=False)
    data = ds.data
    if isinstance(data, torch.Tensor):  # MNIST / FashionMNIST: uint8 [N, H, W]
        pixels = data[torch.from_numpy(idx)].unsqueeze(1)
    else:  # CIFAR-10: numpy uint8 [N, H, W, C]
        pixels = torch.from_numpy(np.ascontiguousarray(data[idx])).permute(0, 3, 1, 2)
    labels = torch.as_tensor(all_labels[idx], dtype=torch.int64)
    images = _normalise(pixels, name)
    expected = (k, *DATASET_SHAPES[name])
    if tuple(images.shape) != expected:
        raise DatasetUnavailable(
            f"Dataset {name!r} in {root_path} has images of shape {tuple(images.shape[1:])}, "
            f"expected {DATASET_SHAPES[name]}.\nReplace its files with the original ones.")
    return images, labels


# ---------------------------------------------------------------------------- bundled real points
#: What a result says about the data it ran on (``r["inputs"]["data"]``).
SOURCE_FULL = "full dataset"
SOURCE_BUNDLED = "bundled real points"
SOURCE_SYNTHETIC = "synthetic stand-in"

#: Points per dataset in the bundle (Figure 4 uses 5, Figure 6 uses 4; draws pick from these).
BUNDLE_SIZE = 10
#: The seed of the documented selection rule (see :func:`build_bundle`).
BUNDLE_SEED = 2026
#: Sizes of the official training splits: a data folder holding fewer images is not the full dataset.
FULL_TRAIN_SIZE = {"mnist": 60_000, "fmnist": 60_000, "cifar10": 50_000}
#: Per dataset: bundle file, source sample file in ``shared/data``, and the human-readable name.
_BUNDLE_FILES = {"mnist": ("mnist.npz", "mnist_sample.npz", "MNIST"),
                 "fmnist": ("fmnist.npz", "fashion_mnist_sample.npz", "Fashion-MNIST"),
                 "cifar10": ("cifar10.npz", "cifar10_sample.npz", "CIFAR-10")}
DATASET_TITLES = {k: v[2] for k, v in _BUNDLE_FILES.items()} | {"synthetic": "synthetic stand-in"}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def bundle_dir() -> Path:
    """The folder of the bundled points inside the package: ``paperlib/resources/points/``."""
    import importlib.resources

    return Path(str(importlib.resources.files("paperlib") / "resources" / "points"))


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bundle_sums(folder: Path) -> dict[str, str]:
    sums = {}
    path = folder / "SHA256SUMS"
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as err:
        raise DatasetUnavailable(f"bundled points: {path} cannot be read ({type(err).__name__}); "
                                 "reinstall paperlib (or restore the file from the repository)") from None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            sums[parts[1]] = parts[0]
    return sums


def bundle_info(name: str, folder: str | os.PathLike | None = None) -> dict:
    """The bundled points of ``name`` (``"mnist"``, ``"fmnist"``, ``"cifar10"``), checked.

    The file's SHA-256 is compared with ``SHA256SUMS`` in the same folder before it is
    read (``np.load(..., allow_pickle=False)``). Returns ``{"pixels": uint8 [K, H, W] or
    [K, H, W, C], "labels": uint8 [K], "indices": int64 [K] (indices in the source split),
    "split": "test", "sha256": hex, "file": name}``.

    Raises :class:`DatasetUnavailable` (one line naming the file) when the file is
    missing, does not match its checksum, or does not hold what it should.
    """
    if name not in _BUNDLE_FILES:
        raise ValueError(f"name: no bundled points for {name!r}; expected one of {', '.join(_BUNDLE_FILES)}")
    folder = bundle_dir() if folder is None else Path(folder)
    fname = _BUNDLE_FILES[name][0]
    path = folder / fname
    if not path.is_file():
        raise DatasetUnavailable(f"bundled points: {path} is missing; reinstall paperlib (or restore the "
                                 "file from the repository)")
    want = _bundle_sums(folder).get(fname)
    got = _sha256(path)
    if want != got:
        raise DatasetUnavailable(f"bundled points: {path} has sha256 {got[:16]}..., expected "
                                 f"{(want or 'none stored')[:16]}... (SHA256SUMS); reinstall paperlib "
                                 "(or restore the file from the repository)")
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in ("pixels", "labels", "indices", "split")}
    C, H, W = DATASET_SHAPES[name]
    shape = (H, W) if C == 1 else (H, W, C)
    K = len(out["labels"])
    if out["pixels"].shape != (K, *shape) or out["pixels"].dtype != np.uint8 or out["indices"].shape != (K,):
        raise DatasetUnavailable(f"bundled points: {path} holds pixels of shape {out['pixels'].shape}, "
                                 f"expected ({K}, {', '.join(map(str, shape))}) uint8")
    return {"pixels": out["pixels"], "labels": out["labels"], "indices": out["indices"],
            "split": str(out["split"]), "sha256": got, "file": fname}


def load_bundled(name: str, k: int, seed: int = 0, *, folder=None) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``k`` of the bundled real points of ``name``, drawn with ``seed`` as :func:`load_points`
    draws from a full dataset (``numpy.random.default_rng(seed).choice(K, k, replace=False)``
    over the ``K =`` :data:`BUNDLE_SIZE` bundled points, in that order).

    Returns ``(images float32 [k, C, H, W], labels int64 [k], info)``; ``info`` holds
    ``indices`` (the chosen points' indices in the source split), ``split``, ``sha256``
    and ``file``. Raises ValueError naming ``k`` when ``k`` exceeds the bundle, and
    :class:`DatasetUnavailable` as :func:`bundle_info`.
    """
    name, k, seed = _check_args(name, k, seed)
    b = bundle_info(name, folder)
    K = len(b["labels"])
    if k > K:
        raise ValueError(f"k: {k} is larger than the {K} bundled {DATASET_TITLES[name]} points; "
                         f"put the full dataset into {data_root()} (or set {ENV_VAR})")
    sel = np.random.default_rng(seed).choice(K, size=k, replace=False)
    px = torch.from_numpy(np.ascontiguousarray(b["pixels"][sel]))
    px = px.unsqueeze(1) if px.ndim == 3 else px.permute(0, 3, 1, 2)
    info = {"indices": [int(i) for i in b["indices"][sel]], "split": b["split"], "sha256": b["sha256"],
            "file": b["file"]}
    return _normalise(px, name), torch.as_tensor(b["labels"][sel].astype(np.int64)), info


def _write_npz(path: Path, arrays: dict) -> None:
    """An ``.npz`` whose bytes depend only on the arrays (fixed zip dates, no compression)."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def build_bundle(source: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, str]:
    """Regenerate the bundled points from the real samples in ``source`` (``shared/data``).

    Rule: for each dataset the sample's test split (MNIST test images 0-999, Fashion-MNIST
    test images 0-199, CIFAR-10 test images 0-999) is permuted with
    ``numpy.random.default_rng(BUNDLE_SEED)``; the first :data:`BUNDLE_SIZE` positions,
    sorted by their index in the official test split, are kept. Writes ``<name>.npz``
    (``pixels``, ``labels``, ``indices``, ``split``) and ``SHA256SUMS`` into ``out``
    (default :func:`bundle_dir`); the same input gives the same bytes. Returns the
    checksums.
    """
    source = Path(source)
    out = bundle_dir() if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sums = {}
    for name, (fname, sample, _) in _BUNDLE_FILES.items():
        with np.load(source / sample, allow_pickle=False) as z:
            images, labels, idx = z["images"], z["labels"], z["test_indices"]
        pos = np.sort(np.random.default_rng(BUNDLE_SEED).permutation(len(labels))[:BUNDLE_SIZE])
        _write_npz(out / fname, {"pixels": images[pos].astype(np.uint8), "labels": labels[pos].astype(np.uint8),
                                 "indices": idx[pos].astype(np.int64), "split": np.array("test")})
        sums[fname] = _sha256(out / fname)
    (out / "SHA256SUMS").write_text("".join(f"{h}  {f}\n" for f, h in sums.items()), encoding="ascii")
    return sums


def _full_split(name: str, root: Path, download: bool) -> bool:
    """Whether ``root`` holds (or, with ``download``, can fetch) the full training split of ``name``."""
    try:
        ds = _load_torchvision(name, root, True, download)
    except DatasetUnavailable:
        return False
    return len(ds) >= FULL_TRAIN_SIZE[name]


def resolve_dataset(name: str, k: int, seed: int = 0, *, mode: str = "quick",
                    extra_roots=None) -> tuple[str, Path | None, str]:
    """Which real points a notebook audits: ``(dataset, root, source)``.

    * the full dataset (the complete training split, :data:`FULL_TRAIN_SIZE`) in the
      default data folder (:func:`data_root`: ``$PAPERLIB_DATA`` or ``<repo>/data``), or in
      one of ``extra_roots``; ``mode='full'`` downloads it into the default folder when it
      is missing: ``(name, resolved folder, SOURCE_FULL)`` -- points drawn from it with
      ``seed``, as the paper did;
    * otherwise the points bundled with the package (:func:`load_bundled`):
      ``(name, None, SOURCE_BUNDLED)``;
    * ``name="synthetic"``: ``("synthetic", None, SOURCE_SYNTHETIC)`` -- only when asked for.

    Never falls back to the synthetic stand-in. Raises :class:`DatasetUnavailable` (one
    line) when neither the full dataset nor the bundle can be had (e.g. a damaged bundle),
    ValueError for a bad ``name``, ``k`` or ``seed``.
    """
    name, k, seed = _check_args(name, k, seed)
    if name == "synthetic":
        return name, None, SOURCE_SYNTHETIC
    roots = [None] + list(extra_roots or [])
    for root in roots:
        folder = data_root() if root is None else Path(root).expanduser()
        if _full_split(name, folder, download=(mode == "full" and root is None)):
            return name, folder.resolve(), SOURCE_FULL
    try:
        load_bundled(name, k, seed)
    except DatasetUnavailable as exc:
        raise DatasetUnavailable(f"{name}: the full dataset is not in {data_root()} and "
                                 + str(exc).splitlines()[0]) from None
    return name, None, SOURCE_BUNDLED


def describe_points(name: str, source: str, indices, *, split: str, sha_ok: bool | None = None,
                    root: Path | None = None) -> str:
    """One line for ``r["inputs"]["data_detail"]``: which points, from where."""
    title = DATASET_TITLES.get(name, name)
    if source == SOURCE_SYNTHETIC:
        return f"synthetic stand-in (uniform random pixels of {title} shape, not real data)"
    ids = ", ".join(str(int(i)) for i in indices)
    tail = " (bundled, sha256 ok)" if source == SOURCE_BUNDLED and sha_ok else (
        " (bundled)" if source == SOURCE_BUNDLED else "")
    if source == SOURCE_FULL:
        tail = " (full dataset in the data folder)"
    return f"{title} {split} split, indices {ids}{tail}"


def _main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m paperlib.implementations.datasets",
                                description="Regenerate the bundled real points from the samples in SOURCE.")
    p.add_argument("--build-bundle", metavar="SOURCE", required=True,
                   help="folder holding mnist_sample.npz, fashion_mnist_sample.npz, cifar10_sample.npz")
    p.add_argument("--out", default=None, help="output folder (default: paperlib/resources/points)")
    a = p.parse_args(argv)
    for f, h in build_bundle(a.build_bundle, a.out).items():
        print(f"{h}  {f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
