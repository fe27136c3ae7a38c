"""``paperlib.check_opacus`` and ``paperlib.CertifiedAccountant`` against real Opacus 1.6.0 objects
(``PrivacyEngine.make_private`` on a tiny ``nn.Linear`` model and a ``TensorDataset``): what they
read, the fixed optimizer recognised, and the boundary (wrong objects and values refused in one
line before any Opacus object is read)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

from paperlib import CertifiedAccountant, check_opacus, check_run  # noqa: E402
from paperlib.mechanisms.certified import certified_for_training_set  # noqa: E402

D_IN, D_OUT = 20, 3
N_PARAMS = D_IN * D_OUT + D_OUT  # 63


def _private(N, batch, sigma=1.1, loss_reduction="mean", accountant="prv", replace_accountant=None, seed=0):
    """A tiny model made private by Opacus 1.6.0 with Poisson sampling."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D_IN, generator=g)  # MNIST-like features would do too: only shapes matter here
    y = torch.randint(0, D_OUT, (N,), generator=g)
    torch.manual_seed(seed)
    model = torch.nn.Linear(D_IN, D_OUT)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant=accountant)
    if replace_accountant is not None:
        engine.accountant = replace_accountant  # before make_private, which hooks the accountant's step
    model, opt, loader = engine.make_private(module=model, optimizer=opt,
                                             data_loader=DataLoader(TensorDataset(x, y), batch_size=batch),
                                             noise_multiplier=sigma, max_grad_norm=1.0, poisson_sampling=True,
                                             loss_reduction=loss_reduction)
    return engine, model, opt, loader


def _train(model, opt, loader, epochs, loss_reduction="mean"):
    crit = torch.nn.CrossEntropyLoss(reduction=loss_reduction)
    steps = 0
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb):
                crit(model(xb), yb).backward()
            opt.step()
            steps += 1
    return steps


@pytest.mark.usefixtures("one_torch_thread")
def test_check_opacus_reads_make_private_and_equals_check_run():
    engine, model, opt, loader = _private(1000, 64)
    r = check_opacus(engine, opt, loader, epochs=2, delta=1e-5, model=model)
    got = r.read_from_opacus
    assert got["dataset_size"] == 1000 and got["n_params"] == N_PARAMS
    assert got["sample_rate"] == loader.sample_rate == 1 / 16  # 1/ceil(1000/64)
    assert got["expected_batch_size"] == opt.expected_batch_size == 62 == int(1000 / 16)
    assert got["noise_multiplier"] == 1.1 and got["loss_reduction"] == "mean" and got["accountant"] == "prv"
    assert got["opacus_version"] == opacus.__version__
    want = check_run(opacus.__version__, 1000, sample_rate=1 / 16, epochs=2, noise_multiplier=1.1, n_params=N_PARAMS,
                     delta=1e-5, accountant="prv")
    for k in ("mechanism", "steps", "claimed_epsilon", "epsilon_certified", "epsilon_forced", "claim_stands"):
        assert getattr(r, k) == getattr(want, k)
    # floors agree on both neighbours (int(999/16) = int(1000/16) = int(1001/16) = 62): the claim stands
    assert r.mechanism == "feasgm" and r.claim_stands
    assert [e.normalisers for e in r.neighbours] == [[62, 62], [62, 62]]
    # the claim is what the engine prints after training those steps
    steps = _train(model, opt, loader, 2)
    assert steps == r.steps == 32
    assert engine.get_epsilon(1e-5) == pytest.approx(r.claimed_epsilon, rel=1e-9)
    # without the model: the optimizer's trainable parameters
    assert check_opacus(engine, opt, loader, epochs=2, delta=1e-5).read_from_opacus["n_params"] == N_PARAMS


@pytest.mark.usefixtures("one_torch_thread")
def test_check_opacus_loss_reduction_sum_is_sgm():
    engine, model, opt, loader = _private(1000, 64, loss_reduction="sum", accountant="rdp")
    r = check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model=model)
    assert r.read_from_opacus["loss_reduction"] == "sum" and r.read_from_opacus["accountant"] == "rdp"
    assert r.mechanism == "sgm" and r.claim_stands
    assert all(e.verdict == "stands" for e in r.neighbours)
    # at batch 50 the added dataset's loader has 21 batches, not 20: SGM or not, the number of steps tells
    engine, model, opt, loader = _private(1000, 50, loss_reduction="sum", accountant="rdp")
    r = check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model=model, batch_size=50)
    assert r.mechanism == "sgm" and [e.verdict for e in r.neighbours] == ["stands", "refuted"]
    assert r.neighbours[1].computed == "update count" and "20 vs 21 an epoch" in r.neighbours[1].why


@pytest.mark.usefixtures("one_torch_thread")
def test_check_opacus_floors_differ_is_not_sgm():
    # 1000 / 50 = 20 batches: int(999/20) = 49 but int(1000/20) = 50 on the removal neighbour
    engine, model, opt, loader = _private(1000, 50, accountant="rdp")
    r = check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model=model, batch_size=50)
    rem = r.neighbours[0]
    assert rem.normalisers == [49, 50] and not rem.floors_agree and not rem.claim_stands
    assert rem.epsilon_forced > r.claimed_epsilon and rem.verdict == "refuted"
    assert not r.claim_stands


def test_check_opacus_refuses_a_plain_loader_and_wrong_objects():
    from torch.utils.data import DataLoader, TensorDataset

    engine, model, opt, loader = _private(200, 20)
    plain = DataLoader(TensorDataset(torch.zeros(200, D_IN)), batch_size=20)
    with pytest.raises(ValueError, match="^data_loader"):
        check_opacus(engine, opt, plain, epochs=1, delta=1e-5)
    with pytest.raises(TypeError, match="^optimizer"):
        check_opacus(engine, torch.optim.SGD(model.parameters(), lr=0.1), plain, epochs=1, delta=1e-5)
    for kw, name in ((dict(privacy_engine=object()), "privacy_engine"), (dict(privacy_engine="engine"), "privacy_engine"),
                     (dict(optimizer="opt"), "optimizer"), (dict(data_loader=[1, 2]), "data_loader"),
                     (dict(model="model"), "model")):
        args = dict(privacy_engine=engine, optimizer=opt, data_loader=loader, model=model)
        args.update(kw)
        with pytest.raises(TypeError, match=f"^{name} must be"):
            check_opacus(args.pop("privacy_engine"), args.pop("optimizer"), args.pop("data_loader"), epochs=1,
                         delta=1e-5, **args)
    for kw, name in ((dict(delta=0.5), "delta"), (dict(delta=-1.0), "delta"), (dict(epochs=0), "epochs"),
                     (dict(epochs=1, steps=5), "epochs or steps"), (dict(accountant="moments"), "accountant"),
                     (dict(allow_large="yes"), "allow_large")):
        args = dict(epochs=1, delta=1e-5)
        args.update(kw)
        with pytest.raises((TypeError, ValueError), match=f"^{name}"):
            check_opacus(engine, opt, loader, **args)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("N,batch", [(1000, 64), (1024, 64)])
def test_check_opacus_after_the_fix_is_sgm(N, batch):
    """After fix_normaliser the optimizer divides by a public constant: check_opacus says SGM and the claim
    stands, also where int(N q) already equals the batch size (1024 / 16 = 64) and before the fix FEASGM's
    floors differ on a neighbour."""
    from paperlib.practitioner import fix_normaliser

    engine, model, opt, loader = _private(N, batch, accountant="rdp")
    before = check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model=model, batch_size=batch)
    fix_normaliser(opt, batch)
    r = check_opacus(engine, opt, loader, epochs=1, delta=1e-5, model=model, batch_size=batch)
    assert r.mechanism == "sgm" and r.inputs["divisor"] == "public"
    assert r.read_from_opacus["fixed_divisor"] == batch and r.claimed_epsilon == before.claimed_epsilon
    assert r.neighbours[0].verdict == "stands"
    acc = CertifiedAccountant(dataset_size=N, n_params=N_PARAMS, batch_size=batch)
    engine2, model2, opt2, loader2 = _private(N, batch, replace_accountant=acc)
    fix_normaliser(opt2, batch)
    _train(model2, opt2, loader2, 1)
    assert acc.divisor == "public" and acc.last_report() is None
    eps = engine2.get_epsilon(1e-5)
    assert acc.last_report().mechanism == "sgm"
    if N == 1024:
        # int(1023/16) = 63 != 64: the shipped release is refuted on the removal neighbour; the added dataset's
        # loader has ceil(1025/64) = 17 batches, not 16, so its number of steps differs, fixed or not
        assert before.neighbours[0].verdict == "refuted"
        assert [e.verdict for e in (before.neighbours[1], r.neighbours[1])] == ["refuted"] * 2
        assert r.neighbours[1].epsilon_forced == float("inf")
        # one answer: the report's certified epsilon is the accountant's
        assert not r.claim_stands and r.epsilon_certified == eps == float("inf")
    else:
        assert r.claim_stands and all(e.verdict == "stands" for e in r.neighbours)
        assert acc.last_report().claim_stands and eps == pytest.approx(r.epsilon_certified, rel=1e-12)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("version,mech", [("1.6.0", "feasgm"), ("0.15.0", "easgm")])
def test_certified_accountant_in_a_real_training_run(version, mech):
    """1.6.0: hooked into a live engine. 0.15.0 (EASGM) cannot run in the installed 1.6.0 engine: there the hook
    refuses it in one line (it computed a silently low epsilon before), and the steps are given by hand."""
    N, batch, sigma, epochs = 1000, 64, 1.1, 2
    acc = CertifiedAccountant(opacus_version=version, dataset_size=N, n_params=N_PARAMS, batch_size=batch)
    assert acc.mechanism() == "certified" and len(acc) == 0 and acc.get_epsilon(1e-5) == 0.0
    if version.startswith("0."):
        engine, model, opt, loader = _private(N, batch, sigma=sigma, replace_accountant=acc)
        with pytest.raises(ValueError, match="^opacus_version: '0.15.0' was given, but the optimizer is Opacus"):
            _train(model, opt, loader, 1)
        acc = CertifiedAccountant(opacus_version=version, dataset_size=N, n_params=N_PARAMS, batch_size=batch)
        for _ in range(epochs * 16):
            acc.step(noise_multiplier=sigma, sample_rate=1 / 16)
        steps = epochs * 16
        engine = acc  # get_epsilon below asks the accountant itself
    else:
        engine, model, opt, loader = _private(N, batch, sigma=sigma, replace_accountant=acc)
        assert engine.accountant is acc
        steps = _train(model, opt, loader, epochs)
    assert acc.history == [(sigma, 1 / 16, steps)] and len(acc) == 1 and steps == 32
    eps = engine.get_epsilon(1e-5)  # the engine asks our accountant
    direct = certified_for_training_set(mech, N, 1 / 16, sigma, N_PARAMS, rounds=steps, delta=1e-5).to_json()
    assert eps == pytest.approx(direct["epsilon_certified"], rel=1e-12)
    assert acc.last_report().mechanism == mech
    if mech == "easgm":  # data-dependent normaliser: above the SGM claim, certified by the chain (THEORY §11.3b)
        rep = acc.last_report()
        assert eps > 1.2 * rep.claimed_epsilon and all("chain" in e.certified_method for e in rep.neighbours)


def test_certified_accountant_checks_its_arguments_first():
    acc = CertifiedAccountant(opacus_version="1.6.0", dataset_size=1000, n_params=10)
    for bad in (0.0, -1.0, 1.5, float("nan"), "1e-5", 0.01):  # 0.01 > 1/dataset_size
        with pytest.raises(ValueError, match="^delta"):
            acc.get_epsilon(bad)  # refused before any step
    assert acc.get_epsilon(1e-5) == 0.0
    for kw, name in ((dict(dataset_size=1), "dataset_size"), (dict(n_params=0), "n_params"),
                     (dict(batch_size=0), "batch_size"), (dict(loss_reduction="avg"), "loss_reduction"),
                     (dict(divisor="fixed"), "divisor"), (dict(opacus_version="1.7.0"), "opacus_version"),
                     (dict(opacus_version=1.6), "opacus_version"), (dict(pld_options=[1]), "pld_options"),
                     (dict(assume_release="yes"), "assume_release")):
        args = dict(opacus_version="1.6.0", dataset_size=1000, n_params=10)
        args.update(kw)
        with pytest.raises((TypeError, ValueError), match=f"^{name}"):
            CertifiedAccountant(**args)
    with pytest.raises(ValueError, match="^noise_multiplier"):
        acc.step(noise_multiplier=0.0, sample_rate=0.1)
    with pytest.raises(ValueError, match="^sample_rate"):
        acc.step(noise_multiplier=1.0, sample_rate=1.5)


def test_certified_accountant_quotes_the_release_accountant():
    """last_report() carries the claim the run would print: PRV from Opacus 1.3, RDP before."""
    for version, want in (("1.6.0", "prv"), ("1.2.0", "rdp"), ("0.15.0", "rdp")):
        acc = CertifiedAccountant(opacus_version=version, dataset_size=1000, n_params=10)
        for _ in range(5):
            acc.step(noise_multiplier=1.0, sample_rate=1 / 16)
        acc.get_epsilon(1e-5)
        assert acc.last_report().claim.accountant == want, version


def test_certified_accountant_refuses_unequal_rounds():
    acc = CertifiedAccountant(opacus_version="1.6.0", dataset_size=1000, n_params=10)
    acc.step(noise_multiplier=1.0, sample_rate=0.05)
    acc.step(noise_multiplier=2.0, sample_rate=0.05)
    assert len(acc) == 2
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.get_epsilon(1e-5)


def test_accountant_is_not_imported_by_the_computing_layers():
    import subprocess
    import sys

    code = ("import sys, paperlib.fdp, paperlib.mechanisms, paperlib.mechanisms.certified, paperlib.practitioner.check\n"
            "assert 'paperlib.practitioner.accountant' not in sys.modules and 'opacus' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.usefixtures("one_torch_thread")
def test_privacy_engine_makes_the_registered_certified_accountant():
    """After one call, PrivacyEngine(accountant="paperlib-certified") trains a live Opacus run; the accountant learns
    the parameter count from the optimizer, and its epsilon equals check's certified epsilon for that run (both
    relations)."""
    from paperlib.practitioner import register_certified_accountant
    from paperlib.practitioner.accountant import ACCOUNTANT_NAME

    N, batch, sigma = 1000, 64, 1.1
    register_certified_accountant(dataset_size=N, batch_size=batch)
    engine, model, opt, loader = _private(N, batch, sigma=sigma, accountant=ACCOUNTANT_NAME)
    assert isinstance(engine.accountant, CertifiedAccountant) and engine.accountant.n_params is None
    steps = _train(model, opt, loader, 2)
    assert engine.accountant.n_params == N_PARAMS
    eps = engine.get_epsilon(1e-5)
    import opacus

    ref = check_run(opacus.__version__, N, batch, steps=steps, noise_multiplier=sigma, n_params=N_PARAMS,
                    delta=1e-5)
    assert eps == pytest.approx(ref.epsilon_certified, rel=1e-9) and math.isfinite(eps)
    rep = engine.accountant.get_epsilon(1e-5, relation="replace-one")
    assert rep == pytest.approx(ref.replace_one["epsilon"], rel=1e-9) and rep > eps  # about twice at small q
    with pytest.raises(ValueError, match="^relation"):
        engine.accountant.get_epsilon(1e-5, relation="substitution")
    with pytest.raises(ValueError, match="^dataset_size"):
        register_certified_accountant(dataset_size=1)


@pytest.mark.usefixtures("one_torch_thread")
def test_certified_accountant_refuses_a_dataset_size_the_optimizer_contradicts():
    """Told 640 records while make_private saw 64 (batch 8: the optimizer divides by int(64/8) = 8): refused at the
    first step, naming dataset_size, instead of a silently wrong epsilon."""
    acc = CertifiedAccountant(dataset_size=640, n_params=N_PARAMS, batch_size=8)
    engine, model, opt, loader = _private(64, 8, replace_accountant=acc)
    with pytest.raises(ValueError, match="^dataset_size: 640 records .* give int\\(N q\\) = 80, but the optimizer "
                                         "divides by 8"):
        _train(model, opt, loader, 1)


def test_certified_accountant_load_state_dict_checks_the_history():
    acc = CertifiedAccountant(dataset_size=1000, n_params=10)
    with pytest.raises(ValueError, match="^history"):
        acc.load_state_dict({"history": [("x", "y", "z")], "mechanism": "certified"})
    assert acc.history == []
    acc.load_state_dict({"history": [(1.1, 1 / 16, 32)], "mechanism": "certified"})
    assert acc.history == [(1.1, 1 / 16, 32)] and math.isfinite(acc.get_epsilon(1e-5))
