"""OpenAI's other tiktoken encodings (p50k_base, cl100k_base, o200k_base), offline.

Their ranks files are vendored in model/ranks/ the way model/gpt2.tiktoken is, and checked by
sha256 against the hashes tiktoken itself publishes (tiktoken_ext/openai_public.py) at load.
They come from the npm package js-tiktoken (MIT), which ships the same ranks in a compact form
("! <first rank> <base64 token> <base64 token> ..."); regenerate them with

    python -m model.encodings          # npm pack js-tiktoken@1.0.21, convert, check every sha256

r50k_base is GPT-2's encoding under another name (same ranks file, pattern and <|endoftext|>),
so it is served from model/gpt2.tiktoken.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from .tokenizer import EOT, GPT2_PATTERN, RANKS_SHA256, get_tokenizer

__all__ = ["ENCODINGS", "EncodingSpec", "RANKS_DIR", "JS_TIKTOKEN", "get_encoding", "convert_js_ranks", "regenerate"]

RANKS_DIR = Path(__file__).with_name("ranks")
JS_TIKTOKEN = "js-tiktoken@1.0.21"  # the npm package the vendored files are regenerated from

_FIM_PREFIX, _FIM_MIDDLE, _FIM_SUFFIX, _ENDOFPROMPT = "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"

# Patterns, special tokens and vocabulary sizes as in tiktoken_ext/openai_public.py (tiktoken 0.x).
_CL100K_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True)
class EncodingSpec:
    name: str
    used_by: str  # which models use it, for the tab's table
    sha256: str  # tiktoken's published expected_hash of the ranks file
    pat_str: str
    special_tokens: dict[str, int]
    n_vocab: int | None = None

    @property
    def path(self) -> Path:
        return RANKS_DIR / f"{self.name}.tiktoken"


ENCODINGS: dict[str, EncodingSpec] = {
    spec.name: spec
    for spec in (
        EncodingSpec("r50k_base", "GPT-2, GPT-3 (same as gpt2)", RANKS_SHA256, GPT2_PATTERN, {EOT: 50256}, 50257),
        EncodingSpec(
            "p50k_base",
            "Codex, text-davinci-002/003",
            "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
            GPT2_PATTERN,
            {EOT: 50256},
            50281,
        ),
        EncodingSpec(
            "cl100k_base",
            "GPT-3.5, GPT-4",
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            _CL100K_PATTERN,
            {EOT: 100257, _FIM_PREFIX: 100258, _FIM_MIDDLE: 100259, _FIM_SUFFIX: 100260, _ENDOFPROMPT: 100276},
        ),
        EncodingSpec(
            "o200k_base",
            "GPT-4o, o1, o3",
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            _O200K_PATTERN,
            {EOT: 199999, _ENDOFPROMPT: 200018},
        ),
    )
}


@lru_cache(maxsize=None)
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name`` built from its vendored ranks file (never the network).

    Raises KeyError for an unknown name, FileNotFoundError if the file is missing, ValueError if
    its sha256 is not tiktoken's (``python -m model.encodings`` rebuilds them)."""
    spec = ENCODINGS[name]
    if spec.sha256 == RANKS_SHA256:
        return get_tokenizer()  # r50k_base: the same file, pattern and special token as gpt2
    if not spec.path.is_file():
        raise FileNotFoundError(f"{spec.path} is missing (`python -m model.encodings` regenerates it)")
    ranks = load_tiktoken_bpe(str(spec.path), expected_hash=spec.sha256)
    return tiktoken.Encoding(
        name=spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
        explicit_n_vocab=spec.n_vocab,
    )


def convert_js_ranks(js_source: str) -> bytes:
    """js-tiktoken's ``dist/ranks/<name>.js`` -> tiktoken's ranks file ("<base64 token> <rank>" lines).

    js-tiktoken stores runs of consecutive ranks as ``"! <first rank> <tok> <tok> ..."`` lines in
    the ``bpe_ranks`` field of a JSON object after ``export default``."""
    data = json.loads(js_source.strip().removeprefix("export default").strip().rstrip(";"))
    lines = []
    for run in data["bpe_ranks"].split("\n"):
        parts = run.split(" ")
        first = int(parts[1])
        lines.extend(f"{tok} {first + i}" for i, tok in enumerate(parts[2:]))
    return ("\n".join(lines) + "\n").encode()


def regenerate(package: str = JS_TIKTOKEN, out_dir: Path = RANKS_DIR, tarball: Path | None = None) -> dict[str, str]:
    """Fetch ``package`` with ``npm pack`` (or read ``tarball``), convert every encoding but
    r50k_base, check each sha256 and write the files. Returns {name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    with tempfile.TemporaryDirectory() as tmp:
        if tarball is None:
            print(f"npm pack {package} ...", flush=True)
            name = subprocess.run(
                ["npm", "pack", package, "--silent"], cwd=tmp, check=True, capture_output=True, text=True
            ).stdout.strip().splitlines()[-1]
            tarball = Path(tmp) / name
        with tarfile.open(tarball) as tar:
            for spec in ENCODINGS.values():
                if spec.sha256 == RANKS_SHA256:
                    continue
                member = tar.extractfile(f"package/dist/ranks/{spec.name}.js")
                if member is None:
                    raise ValueError(f"{tarball.name} has no dist/ranks/{spec.name}.js")
                data = convert_js_ranks(member.read().decode())
                digest = hashlib.sha256(data).hexdigest()
                if digest != spec.sha256:
                    raise ValueError(f"{spec.name}: sha256 {digest} is not tiktoken's {spec.sha256}; file not written")
                spec.path.parent.mkdir(parents=True, exist_ok=True)
                target = out_dir / spec.path.name
                target.write_bytes(data)
                written[spec.name] = str(target)
                print(f"{spec.name}: {len(data) / 1e6:.2f} MB, sha256 matches tiktoken's -> {target}", flush=True)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m model.encodings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default=JS_TIKTOKEN, help=f"npm package spec (default {JS_TIKTOKEN})")
    parser.add_argument("--tarball", type=Path, help="an already downloaded `npm pack` tarball (no network)")
    parser.add_argument("--out", type=Path, default=RANKS_DIR, help=f"where to write (default {RANKS_DIR})")
    args = parser.parse_args(argv)
    try:
        regenerate(args.package, args.out, args.tarball)
    except (subprocess.CalledProcessError, ValueError, OSError) as err:
        sys.exit(f"could not regenerate the ranks files: {err}")


if __name__ == "__main__":
    main()
