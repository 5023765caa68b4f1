"""model.convert against Hugging Face's own GPT2LMHeadModel: the same logits both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model import GPT, GPTConfig, load_pretrained, save_pretrained
from model.convert import from_hf, main, to_hf

transformers = pytest.importorskip("transformers")

TOL = 1e-4
VOCAB = 97  # small and odd, so a transposed or misplaced matrix cannot line up by accident


def randomise_vectors(model: torch.nn.Module) -> torch.nn.Module:
    """Random biases and LayerNorm gains, so that every tensor of the mapping matters (GPT-2
    init leaves biases at zero and gains at one, which a misplaced vector would not reveal)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.normal_(1.0 if "ln_" in name and name.endswith("weight") else 0.0, 0.1)
    return model


def random_ours(pos_encoding: str, seed: int = 0, scale_embedding: bool = False) -> GPT:
    torch.manual_seed(seed)
    config = GPTConfig(
        vocab_size=VOCAB, block_size=24, n_layer=2, n_head=4, d_model=32, pos_encoding=pos_encoding, scale_embedding=scale_embedding
    )
    return randomise_vectors(GPT(config)).eval()


def hf_logits(hf_model, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return hf_model(idx).logits


def our_logits(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx).logits


@pytest.fixture
def idx() -> torch.Tensor:
    return torch.randint(0, VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("pos_encoding,scale_embedding", [("sinusoidal", False), ("learned", False), ("sinusoidal", True), ("learned", True)])
def test_to_hf_gives_the_same_logits(tmp_path, idx, pos_encoding, scale_embedding):
    """Also a model whose token embeddings are scaled by sqrt(d_model): its GPT-2 twin runs the
    residual stream divided by that scale (see model.convert)."""
    ours = random_ours(pos_encoding, scale_embedding=scale_embedding)
    hf_dir = to_hf(save_pretrained(ours, tmp_path / "ours"), tmp_path / "hf")
    hf_model, info = transformers.GPT2LMHeadModel.from_pretrained(hf_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    hf_model.eval()
    assert hf_model.config.activation_function == "gelu_new"
    # GPT-2's output head is the (tied) token embedding, as ours
    assert hf_model.lm_head.weight.data_ptr() == hf_model.transformer.wte.weight.data_ptr()
    torch.testing.assert_close(hf_logits(hf_model, idx), our_logits(ours, idx), atol=TOL, rtol=0)


def test_to_hf_sinusoidal_wpe_is_the_positional_table(tmp_path):
    ours = random_ours("sinusoidal")
    hf_model = transformers.GPT2LMHeadModel.from_pretrained(to_hf(save_pretrained(ours, tmp_path / "o"), tmp_path / "hf"))
    torch.testing.assert_close(hf_model.transformer.wpe.weight.detach(), ours.position_table(), atol=0, rtol=0)


def random_hf(tmp_path: Path) -> tuple[object, Path]:
    torch.manual_seed(2)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=24, n_embd=32, n_layer=2, n_head=4, bos_token_id=None, eos_token_id=None
    )
    hf_model = randomise_vectors(transformers.GPT2LMHeadModel(config)).eval()
    folder = tmp_path / "hf"
    hf_model.save_pretrained(folder)
    return hf_model, folder


def test_from_hf_gives_the_same_logits(tmp_path, idx):
    hf_model, folder = random_hf(tmp_path)
    ours = load_pretrained(from_hf(folder, tmp_path / "ours"))
    assert ours.config.pos_encoding == "learned"
    assert ours.config.n_layer == 2 and ours.config.d_model == 32 and ours.config.block_size == 24
    torch.testing.assert_close(our_logits(ours, idx), hf_logits(hf_model, idx), atol=TOL, rtol=0)


def test_from_hf_reads_hub_style_names(tmp_path, idx):
    """Checkpoints on the Hub (e.g. openai-community/gpt2) name weights without ``transformer.``
    and carry the causal-mask buffers ``h.N.attn.bias``."""
    hf_model, folder = random_hf(tmp_path)
    state = {k.removeprefix("transformer."): v for k, v in load_file(str(folder / "model.safetensors")).items()}
    for i in range(2):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 24, 24))
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    ours = load_pretrained(from_hf(folder, tmp_path / "ours"))
    torch.testing.assert_close(our_logits(ours, idx), hf_logits(hf_model, idx), atol=TOL, rtol=0)


def test_round_trip_ours_hf_ours(tmp_path, idx):
    ours = random_ours("sinusoidal", seed=3)
    hf_dir = to_hf(save_pretrained(ours, tmp_path / "ours"), tmp_path / "hf")
    back = load_pretrained(from_hf(hf_dir, tmp_path / "back"))
    # The sinusoidal table comes back as learned positions holding the same numbers.
    assert back.config.pos_encoding == "learned"
    torch.testing.assert_close(our_logits(back, idx), our_logits(ours, idx), atol=TOL, rtol=0)
    for name, p in ours.state_dict().items():
        if name != "pe":
            torch.testing.assert_close(back.state_dict()[name], p, atol=0, rtol=0)


def test_cli_both_ways(tmp_path, idx, capsys):
    ours = random_ours("learned", seed=4)
    save_pretrained(ours, tmp_path / "ours")
    main(["--to-hf", str(tmp_path / "hf"), "--model", str(tmp_path / "ours")])
    main(["--from-hf", str(tmp_path / "hf"), "--out", str(tmp_path / "back")])
    assert "GPT2LMHeadModel.from_pretrained" in capsys.readouterr().out
    torch.testing.assert_close(our_logits(load_pretrained(tmp_path / "back"), idx), our_logits(ours, idx), atol=TOL, rtol=0)


def test_the_shipped_float16_weights_convert_to_float32_by_default(tmp_path):
    """The shipped weights are stored in float16; transformers loads a checkpoint in its stored
    dtype, so a float16 conversion would give logits ~1e-2 from the app's on a CPU. The default
    writes float32, and transformers then computes what our float32 model computes."""
    from model import WEIGHTS_DIR

    main(["--to-hf", str(tmp_path / "hf")])  # --model defaults to the shipped folder
    stored = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert {t.dtype for t in stored.values()} == {torch.float32}
    hf_model = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    assert hf_model.dtype == torch.float32
    idx = torch.randint(0, 50257, (2, 16), generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(hf_logits(hf_model, idx), our_logits(load_pretrained(WEIGHTS_DIR), idx), atol=TOL, rtol=0)
    main(["--to-hf", str(tmp_path / "hf16"), "--dtype", "stored"])
    assert {t.dtype for t in load_file(str(tmp_path / "hf16" / "model.safetensors")).values()} == {torch.float16}


def test_from_hf_refuses_pickled_weights(tmp_path):
    _, folder = random_hf(tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(FileNotFoundError, match="safetensors is required"):
        from_hf(folder, tmp_path / "ours")


def test_from_hf_refuses_a_different_activation(tmp_path):
    _, folder = random_hf(tmp_path)
    config = (folder / "config.json").read_text().replace('"gelu_new"', '"relu"')
    (folder / "config.json").write_text(config)
    with pytest.raises(ValueError, match="activation_function"):
        from_hf(folder, tmp_path / "ours")


def test_convert_needs_no_transformers(tmp_path):
    """transformers is a dev dependency: the converter must run without it."""
    import subprocess
    import sys

    save_pretrained(random_ours("sinusoidal"), tmp_path / "ours")
    code = (
        "import sys; sys.modules['transformers'] = None\n"  # any import of it now fails
        "from model.convert import main\n"
        f"main(['--to-hf', {str(tmp_path / 'hf')!r}, '--model', {str(tmp_path / 'ours')!r}])\n"
        f"main(['--from-hf', {str(tmp_path / 'hf')!r}, '--out', {str(tmp_path / 'back')!r}])\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, capture_output=True)
    assert (tmp_path / "back" / "model.safetensors").is_file()


def test_attention_weights_equal_gpt2s(tmp_path, idx):
    """The attention tab's weights are GPT-2's own attention probabilities."""
    ours = random_ours("sinusoidal", seed=5)
    hf_dir = to_hf(save_pretrained(ours, tmp_path / "ours"), tmp_path / "hf")
    hf_model = transformers.GPT2LMHeadModel.from_pretrained(hf_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = hf_model(idx, output_attentions=True).attentions
        mine = ours(idx, output_attentions=True).attentions
    assert len(theirs) == len(mine) == 2
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_cli_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="config.json not found"):
        main(["--to-hf", str(tmp_path / "hf"), "--model", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit, match="config.json not found"):
        main(["--from-hf", str(tmp_path / "nothing"), "--out", str(tmp_path / "ours")])
