"""GPTModel and the tensor-parallel layers from Python: torch.nn.Modules whose tensors are the C++
ones (no copies either way), with the same outputs and gradients as plain PyTorch references."""
import pytest
import torch
import torch.nn.functional as F

import megatron_cpp
from gpt_reference import Config, from_megatron_state_dict


def tiny_config(**fields):
    return megatron_cpp.TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4, hidden_dropout=0.0,
                                          attention_dropout=0.0, **fields)


def test_gpt_model_is_a_torch_module_over_the_cpp_tensors():
    model = megatron_cpp.GPTModel(tiny_config(), 100, 16, make_vocab_size_divisible_by=32)
    assert isinstance(model, torch.nn.Module) and model.padded_vocab_size == 128
    params = dict(model.named_parameters())
    cpp = model.cpp_module.named_parameters()
    assert list(params) == list(cpp.keys())
    # The very tensor objects C++ holds, not copies.
    assert all(params[name] is tensor for name, tensor in cpp.items())
    state = model.state_dict()
    assert list(state) == list(params) and "decoder.layers.1.mlp.linear_fc2.weight" in state
    assert all(state[k].data_ptr() == params[k].data_ptr() for k in state)
    # to() converts in place: the same objects, now bf16 on both sides.
    before = params["decoder.final_layernorm.weight"]
    model.to(torch.bfloat16)
    assert cpp["decoder.final_layernorm.weight"] is before and before.dtype == torch.bfloat16
    model.eval()
    assert not model.training and not model.cpp_module.training and not model.decoder.layers[0].training


def test_gpt_model_matches_a_plain_pytorch_gpt():
    model = megatron_cpp.GPTModel(tiny_config(), 64, 16, make_vocab_size_divisible_by=64, seed=3)
    ref = from_megatron_state_dict(Config(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=4,
                                          ffn_hidden_size=128, max_seq_len=16), model.state_dict())
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    labels = torch.roll(tokens, -1, dims=1)
    loss = model(tokens, labels=labels)
    want = ref(tokens, labels=labels)
    torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-5)
    loss.mean().backward()
    want.mean().backward()
    grad = dict(model.named_parameters())["embedding.word_embeddings.weight"].grad
    torch.testing.assert_close(grad, ref.wte.weight.grad, rtol=1e-3, atol=1e-6)
    # load_state_dict copies into the C++ tensors; a Python optimizer steps them in place.
    other = megatron_cpp.GPTModel(tiny_config(), 64, 16, make_vocab_size_divisible_by=64, seed=4)
    other.load_state_dict(model.state_dict())
    torch.testing.assert_close(other(tokens, labels=labels), loss.detach())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    assert not torch.equal(model(tokens, labels=labels), loss.detach())


def test_load_state_dict_names_missing_and_unexpected_keys():
    model = megatron_cpp.GPTModel(tiny_config(), 64, 16)
    state = model.state_dict()
    state.pop("decoder.final_layernorm.bias")
    state["decoder.extra"] = torch.zeros(1)
    with pytest.raises(RuntimeError, match=r"(?s)Missing key\(s\).*decoder.final_layernorm.bias.*Unexpected key\(s\).*decoder.extra"):
        model.load_state_dict(state)
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["decoder.final_layernorm.bias"] and result.unexpected_keys == ["decoder.extra"]


def test_tensor_parallel_layers_without_a_group_are_plain_layers():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8)
    col = megatron_cpp.ColumnParallelLinear(8, 6)
    torch.testing.assert_close(col(x), F.linear(x, col.weight, col.bias))
    row = megatron_cpp.RowParallelLinear(8, 6, bias=False)
    assert [n for n, _ in row.named_parameters()] == ["weight"]
    torch.testing.assert_close(row(x), F.linear(x, row.weight))
    emb = megatron_cpp.VocabParallelEmbedding(10, 4)
    ids = torch.tensor([[1, 9], [0, 3]])
    torch.testing.assert_close(emb(ids), F.embedding(ids, emb.weight))
    logits = torch.randn(4, 10)
    target = torch.tensor([1, 0, 9, 3])
    torch.testing.assert_close(megatron_cpp.vocab_parallel_cross_entropy(logits, target),
                               F.cross_entropy(logits, target, reduction="none"))
    # Gradients reach the C++ parameters through the Python module.
    col(x).sum().backward()
    assert col.cpp_module.named_parameters()["weight"].grad is not None


def test_collectives_work_in_place_on_python_tensors():
    world = megatron_cpp.init_distributed(megatron_cpp.LauncherEnv.from_variables({}))
    t = torch.arange(4.0)
    ptr = t.data_ptr()
    world.all_reduce(t, megatron_cpp.ReduceOp.MAX)
    out = torch.empty(4)
    world.all_gather(out, t)
    assert t.data_ptr() == ptr and torch.equal(out, torch.arange(4.0))
    with pytest.raises(RuntimeError, match=r"all_gather"):
        world.all_gather(torch.empty(3), t)
