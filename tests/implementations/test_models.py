"""Models: exact parameter counts, fixed seeded starting parameters, per-example gradients."""

import pytest
import torch

from paperlib.implementations.models import (MODEL_INPUT, MODEL_NAMES, MODEL_PARAMETERS, build_model,
                                             count_parameters, flat_parameters, per_example_grads)

EXPECTED = {"cnn-mnist": 26_010, "cnn-cifar10": 550_570, "large-mnist": 1_485_217, "tiny": 430}
DENOISERS = {"dpfeta-mnist": 1_485_217, "privimage-mnist": 1_753_345, "privimage-cifar10": 1_754_499}  # tests/implementations/test_models_paper.py


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_count_exact(name):
    model = build_model(name)
    assert count_parameters(model) == EXPECTED[name] == MODEL_PARAMETERS[name]
    out = model(torch.zeros(2, *MODEL_INPUT[name]))
    assert out.shape == (2, 10)


def test_names_and_inputs():
    assert set(MODEL_NAMES) == set(EXPECTED) | set(DENOISERS)
    assert MODEL_INPUT["cnn-mnist"] == (1, 28, 28) and MODEL_INPUT["cnn-cifar10"] == (3, 32, 32)


def test_opacus_compatible_layers_only():
    allowed = (torch.nn.Conv2d, torch.nn.Linear, torch.nn.GroupNorm, torch.nn.Embedding)
    for name in MODEL_NAMES:
        for m in build_model(name).modules():
            if any(p.requires_grad for p in m.parameters(recurse=False)):
                assert isinstance(m, allowed), (name, m)
            assert not isinstance(m, torch.nn.modules.batchnorm._BatchNorm)


def test_seeded_and_rng_untouched():
    state = torch.random.get_rng_state()
    a, b, c = build_model("cnn-mnist", 3), build_model("cnn-mnist", 3), build_model("cnn-mnist", 4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(flat_parameters(a), flat_parameters(b))
    assert not torch.equal(flat_parameters(a), flat_parameters(c))


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown model"):
        build_model("resnet")


@pytest.mark.parametrize("name", ["tiny", "cnn-mnist"])
def test_per_example_grads_match_autograd(name):
    torch.manual_seed(0)
    model = build_model(name, seed=1)
    X = torch.randn(3, *MODEL_INPUT[name])
    y = torch.randint(0, 10, (3,))
    G = per_example_grads(model, X, y)
    assert G.shape == (3, count_parameters(model))
    for i in range(3):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(X[i:i + 1]), y[i:i + 1]).backward()
        g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        torch.testing.assert_close(G[i], g, rtol=1e-4, atol=1e-6)
