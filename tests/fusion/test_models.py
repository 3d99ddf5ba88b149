import pytest
import torch

from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import build_model, lm_config
from semlm.fusion.model import FusionLM


def config(vocab_size=12, kind="fusion", **kwargs):
    return lm_config(BackboneConfig(vocab_size, d_model=16, n_layers=3, n_heads=2, d_ff=32), kind=kind, **kwargs)


def test_blocks_start_identical_like_torch_encoder():
    torch.manual_seed(0)
    blocks = build_model(config()).backbone.blocks
    for block in blocks[1:]:
        for (name, a), (_, b) in zip(blocks[0].state_dict().items(), block.state_dict().items()):
            assert torch.equal(a, b), name
    assert blocks[0].attention.qkv.bias.abs().sum() == 0 and blocks[0].attention.out.bias.abs().sum() == 0


def test_fused_input_is_e_plus_u_plus_gated_u():
    torch.manual_seed(0)
    model: FusionLM = build_model(config())
    e, s = torch.randn(2, 5, 16), torch.rand(2, 5, 22)
    u = s @ model.semantic_projection.weight.T + model.semantic_projection.bias
    g = torch.sigmoid(torch.cat([e, s], -1) @ model.gate.weight.T + model.gate.bias)
    torch.testing.assert_close(model.fuse(e, s), e + u + g * u)


def test_ablation_without_gate_is_e_plus_u():
    torch.manual_seed(0)
    model = build_model(config(gate=False))
    assert model.gate is None
    e, s = torch.randn(1, 3, 16), torch.rand(1, 3, 22)
    torch.testing.assert_close(model.fuse(e, s), e + model.semantic_projection(s))


def test_output_layer_is_tied_to_the_input_embedding():
    torch.manual_seed(0)
    model = build_model(config(kind="baseline")).eval()
    ids = torch.randint(0, 12, (2, 4))
    out = model(ids)
    torch.testing.assert_close(out.logits, out.hidden @ model.backbone.embed.weight.T)
    assert not any(p.shape == (12, 16) and p is not model.backbone.embed.weight for p in model.parameters())


def test_auxiliary_head_has_the_papers_shape_and_range():
    model = build_model(config()).eval()
    assert model.aux_head[0].out_features == max(64, 2 * 22)
    out = model(torch.randint(0, 12, (2, 4)), torch.rand(2, 4, 22))
    assert out.feature_pred.shape == (2, 4, 22) and 0 < out.feature_pred.min() and out.feature_pred.max() < 1


def test_fusion_model_refuses_missing_or_misshapen_features():
    model = build_model(config())
    with pytest.raises(ValueError, match="needs the semantic features"):
        model(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"features must have shape \(1, 3, 22\)"):
        model(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, 5))
