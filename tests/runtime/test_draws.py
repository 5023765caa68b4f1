"""The generator the server and the browser share (runtime/draws.py, web/engine/draws.js):
Philox4x32-10 against the published known-answer vectors, each language on its own, then the two
against each other on the draws the app uses (uniforms, normals, whole numbers, any start and lane)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from runtime import draws

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "web" / "draws.mjs"

# Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter, key -> the four words.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0), (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
# (seed, stream, n, start, lane): odd and even starts, a block past 2**32, the largest seed, many lanes.
UNIFORM = [(0, 1, 1000, 0, 0), (42, 1, 7, 3, 0), (2**32 - 1, 2, 33, 2**33 + 1, 5), (7, 3, 64, 0, 2**32 - 1), (123456789, 4, 5, 10**12, 17)]
NORMAL = [(0, 2, 2000, 0, 0), (42, 2, 9, 5, 3), (2**31 - 1, 2, 16, 1, 1000)]
INTEGERS = [(0, 3, 200, 84, 0, 0), (5, 3, 50, 2**32, 7, 2), (9, 3, 10, 1, 0, 0), (11, 3, 100, 1_000_003, 999, 4)]
ERRORS = [(-1, 1, 1, 0, 0), (0, 2**32, 1, 0, 0), (0, 1, 1, -3, 0), (0, 1, 1, 0, 2**32)]


@pytest.fixture(scope="module")
def node_answer(tmp_path_factory):
    node = shutil.which("node")
    assert node, "node not found: the browser engine's tests need Node.js 20"
    request = tmp_path_factory.mktemp("draws") / "request.json"
    request.write_text(json.dumps({"kat": [{"counter": c, "key": k} for c, k, _ in KAT], "uniform": UNIFORM,
                                   "normal": NORMAL, "integers": INTEGERS, "errors": ERRORS}))
    result = subprocess.run([node, str(SCRIPT), str(request)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_python_gives_the_published_vectors():
    for counter, key, expected in KAT:
        assert draws.philox4x32(np.array([counter], np.uint32), key)[0].tolist() == list(expected)


def test_javascript_gives_the_published_vectors(node_answer):
    assert node_answer["kat"] == [list(expected) for _, _, expected in KAT]


def test_the_streams_are_one_table(node_answer):
    assert node_answer["streams"] == draws.STREAMS
    assert len(set(draws.STREAMS.values())) == len(draws.STREAMS)


def test_uniforms_are_the_same_numbers(node_answer):
    for args, got in zip(UNIFORM, node_answer["uniform"]):
        expected = draws.uniform(*args)
        assert np.array_equal(np.array(got), expected), args  # exact: integer arithmetic and one division by 2**53
        assert ((expected >= 0) & (expected < 1)).all()


def test_normals_agree_to_the_platforms_rounding(node_answer):
    for args, got in zip(NORMAL, node_answer["normal"]):
        expected = draws.normal(*args)
        assert np.allclose(np.array(got), expected, rtol=1e-13, atol=1e-13), args
        # float32, as a weight keeps it: the same value
        assert np.array_equal(np.array(got, np.float32), expected.astype(np.float32)), args


def test_whole_numbers_are_the_same(node_answer):
    for (seed, stream, n, high, start, lane), got in zip(INTEGERS, node_answer["integers"]):
        expected = draws.integers(seed, stream, n, high, start, lane)
        assert got == expected.tolist()
        assert expected.min() >= 0 and expected.max() < high


def test_a_bad_argument_is_refused_in_both(node_answer):
    for args, message in zip(ERRORS, node_answer["errors"]):
        assert message is not None, args
        with pytest.raises(ValueError):
            draws.uniform(*args)


def test_a_draw_depends_on_its_index_alone():
    """A counter-based generator: any slice is the slice of the whole, whatever was drawn before."""
    whole = draws.uniform(3, 1, 100)
    assert np.array_equal(draws.uniform(3, 1, 9, start=41), whole[41:50])
    assert np.array_equal(draws.normal(3, 2, 5, start=11), draws.normal(3, 2, 20)[11:16])
    assert not np.array_equal(draws.uniform(3, 1, 10), draws.uniform(4, 1, 10))
    assert not np.array_equal(draws.uniform(3, 1, 10), draws.uniform(3, 2, 10))
    assert not np.array_equal(draws.uniform(3, 1, 10), draws.uniform(3, 1, 10, lane=1))


def test_the_draws_look_uniform_and_normal():
    u = draws.uniform(0, 1, 200_000)
    assert abs(u.mean() - 0.5) < 0.003 and abs(u.var() - 1 / 12) < 0.001
    counts = np.bincount((u * 10).astype(int), minlength=10)
    assert (abs(counts - 20_000) < 600).all()  # ~4 standard deviations
    z = draws.normal(0, 2, 200_000)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs((abs(z) < 1.96).mean() - 0.95) < 0.003
