"""playground/limits.py: its one parser of environment variables at the edges of their ranges, and
that no other module reads the environment for a limit (each limit, and the variable that changes
it, written once)."""

from __future__ import annotations

import ast
import logging
import math
import re
from pathlib import Path

import pytest

from playground import limits
from playground.limits import env_float, env_int

ROOT = Path(__file__).resolve().parents[2]
NAME = "PLAYGROUND_SOME_LIMIT"

# Modules that read the environment for something other than a limit, and what.
READS_OTHER_SETTINGS = {
    "playground/resources.py": "the execution provider and the ONNX file (PLAYGROUND_PROVIDER, PLAYGROUND_ONNX)",
    "playground/model_source.py": "the models' cache folder (PLAYGROUND_MODELS_DIR)",
    "playground/hub_link.py": "the published model repository and where the Hub is (PLAYGROUND_MODEL_REPO, PLAYGROUND_HUB_URL)",
    "playground/ui/serving/visitors.py": "which proxies are trusted (PLAYGROUND_TRUSTED_PROXIES, PLAYGROUND_PROXY_HOPS, SPACE_ID)",
    "playground/ui/serving/__init__.py": "Gradio's own settings, given defaults before the queue is made (GRADIO_*)",
}
OTHER_SETTINGS = {"PLAYGROUND_PROVIDER", "PLAYGROUND_ONNX", "PLAYGROUND_MODELS_DIR", "PLAYGROUND_MODEL_REPO", "PLAYGROUND_HUB_URL",
                  "PLAYGROUND_TRUSTED_PROXIES", "PLAYGROUND_PROXY_HOPS", "PLAYGROUND_SCREENSHOTS"}
VARIABLE = re.compile(r"PLAYGROUND_[A-Z0-9_]+")


def int_of(raw: str, default: int = 7, low: int = 2, high: int = 100) -> int:
    return env_int(NAME, default, low, high, {NAME: raw})


def float_of(raw: str, default: float = 5.0, low: float = 0.5, high: float = 600.0) -> float:
    return env_float(NAME, default, low, high, {NAME: raw})


def refused(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and NAME in r.getMessage()]


@pytest.mark.parametrize("raw, want", [("2", 2), ("100", 100), ("50", 50), (" 9 ", 9), ("+3", 3), ("007", 7)])
def test_a_whole_number_in_range_is_taken_both_ends_included(raw, want, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert int_of(raw) == want
    assert refused(caplog) == []


@pytest.mark.parametrize("raw", ["1", "101", "0", "-2", "2.0", "2.5", "1e2", "many", "²", "0x10", "1_000", "nan"])
def test_anything_else_keeps_the_default_with_a_warning_naming_it(raw, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert int_of(raw) == 7
    [message] = refused(caplog)
    # the variable, the value as given, the range accepted and the default used
    assert f"{NAME}={raw!r}" in message and "from 2 to 100" in message and "the default, 7" in message


@pytest.mark.parametrize("raw", ["", "   "])
def test_unset_or_blank_is_the_default_without_a_word(raw, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert int_of(raw) == 7 and float_of(raw) == 5.0
        assert env_int(NAME, 7, 2, 100, {}) == 7 and env_float(NAME, 5.0, 0.5, 600.0, {}) == 5.0
    assert refused(caplog) == []


@pytest.mark.parametrize("raw, want", [("0.5", 0.5), ("600", 600.0), ("2.5", 2.5), ("6e2", 600.0), (" 1 ", 1.0)])
def test_a_number_in_range_is_taken_both_ends_included(raw, want, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert float_of(raw) == want
    assert refused(caplog) == []


@pytest.mark.parametrize("raw", ["0.49", "600.01", "0", "-1", "1e9", "nan", "inf", "-inf", "soon", "5s"])
def test_any_other_number_keeps_the_default_with_a_warning_naming_it(raw, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert float_of(raw) == 5.0
    [message] = refused(caplog)
    assert f"{NAME}={raw!r}" in message and "from 0.5 to 600" in message and "the default, 5" in message


def test_a_range_of_one_value_and_a_zero_low_end():
    assert int_of("4", 4, 4, 4) == 4 and int_of("5", 4, 4, 4) == 4 and int_of("3", 4, 4, 4) == 4
    assert int_of("0", 4, 0, 1_000) == 0 and float_of("0", 5.0, 0.0, 60.0) == 0.0 and float_of("60", 5.0, 0.0, 60.0) == 60.0
    assert float_of("nan", 5.0, -math.inf, math.inf) == 5.0 and float_of("-1e300", 5.0, -math.inf, math.inf) == -1e300


def test_the_parser_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv(NAME, "42")
    assert env_int(NAME, 7, 2, 100) == 42 and env_float(NAME, 5.0, 0.5, 600.0) == 42.0


def _sources() -> list[Path]:
    return sorted(p for top in ("playground", "runtime") for p in (ROOT / top).rglob("*.py"))


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "environb", "getenv"):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & {"environ", "getenv"}:
            return True
    return False


def _variables(tree: ast.AST) -> set[str]:
    """The PLAYGROUND_* names a module's code spells out (docstrings and comments aside)."""
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and VARIABLE.fullmatch(n.value)}


def test_only_limits_reads_the_environment_for_a_limit():
    readers, strays = [], {}
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name == "playground/limits.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _reads_environment(tree) and name not in READS_OTHER_SETTINGS:
            readers.append(name)
        if (stray := _variables(tree) - OTHER_SETTINGS):
            strays[name] = sorted(stray)
    assert readers == [], f"read the environment: a limit's variable belongs in playground/limits.py ({readers})"
    assert strays == {}, f"name a limit's variable outside playground/limits.py: {strays}"
    assert all((ROOT / name).exists() for name in READS_OTHER_SETTINGS)  # the list names real files


def test_every_limit_variable_is_documented_and_none_is_another_setting():
    tree = ast.parse((ROOT / "playground/limits.py").read_text(encoding="utf-8"))
    variables = _variables(tree)
    assert len(variables) >= 17 and not variables & OTHER_SETTINGS
    docs = (ROOT / "docs/app.md").read_text(encoding="utf-8")
    assert sorted(v for v in variables if not re.search(rf"`{v}(=[^`]*)?`", docs)) == []


def test_the_defaults_hold_together():
    # more generations run than rows (the rest take turns in the loop's line, which never refuses them)
    assert limits.MAX_BATCH_ROWS < limits.GENERATION_CONCURRENCY <= limits.MAX_BATCH_ROWS + limits.MAX_WAITING_REQUESTS
    assert limits.MAX_WAITING_GENERATIONS + limits.MAX_WAITING_FORWARD + limits.MAX_WAITING_LEARNERS < limits.QUEUE_MAX_SIZE
    assert 1 <= limits.SESSIONS_PER_VISITOR <= limits.MAX_SESSIONS and 1 <= limits.RESULTS_PER_VISITOR <= limits.MAX_RESULTS


def test_every_tabs_input_limit_is_in_limits():
    """The bounds a tab's checks apply to a learner's input are limits' own (Watch it learn's too):
    no tab's module spells one out as a number of its own."""
    from playground import limits
    from playground.learn import run

    assert (run.MAX_SEED, run.MAX_PROMPT_CHARS) == (limits.MAX_LEARN_SEED, limits.MAX_LEARN_PROMPT_CHARS)
    assert (run.MIN_STEPS, run.MAX_STEPS, run.MIN_SECONDS, run.MAX_SECONDS) == (
        limits.MIN_LEARN_STEPS, limits.MAX_LEARN_STEPS, limits.MIN_LEARN_SECONDS, limits.MAX_LEARN_SECONDS)
    own = {}
    for path in sorted((ROOT / "playground").rglob("*.py")):
        if path.name == "limits.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # validate_int(..., maximum=500) or validate_text(..., max_chars=500): a limit written in place
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")).startswith("validate_"):
                for kw in node.keywords:
                    if kw.arg in ("minimum", "maximum", "max_chars") and isinstance(kw.value, ast.Constant) and kw.value.value not in (0, 1):
                        own.setdefault(path.relative_to(ROOT).as_posix(), []).append(f"{kw.arg}={kw.value.value}")
    assert own == {}, f"limits written in place of playground/limits.py's: {own}"


def test_limits_reach_the_browser_by_one_route_with_their_own_names(monkeypatch):
    """limits.for_browser() is every numeric limit by its name here (no flag, no function), and it
    is what the app's Run on: this browser carries. Watch it learn's learn.json and the static
    edition's site.json carry the same dict, whose names their pages read (in Chromium:
    tests/browser/test_browser_learn.py, tests/browser/test_static_edition.py)."""
    import json
    import re

    from playground.ui import generation
    from playground.ui.serving.browser_files import BrowserFiles

    shown = limits.for_browser()
    assert shown["MAX_PROMPT_CHARS"] == limits.MAX_PROMPT_CHARS and shown["MAX_LEARN_SEED"] == limits.MAX_LEARN_SEED
    assert shown["MAX_TOP_K"] == limits.MAX_TOP_K and shown["MIN_TOP_P"] == limits.MIN_TOP_P
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in shown.values())
    assert not any(callable(getattr(limits, name)) for name in shown)
    files = BrowserFiles.for_model({})
    monkeypatch.setattr(BrowserFiles, "page_config", lambda self, hub_model=None: {"runOn": "browser/run_on.js"})
    mount = generation.run_on_js(files)["mount"]
    config = json.loads(re.search(r"m\.mount\(element, (\{.*\})\)\)", mount).group(1))
    assert config["limits"] == shown


def test_the_browsers_generation_checks_accept_and_refuse_what_the_servers_do_at_every_bound():
    """Run on: this browser's settings check (web/app/settings_checks.js) fed limits.for_browser(),
    under Node.js, and the server's (playground.generation.params.validate_params), on each
    setting exactly at its bounds (accepted), one step past them (refused), and the prompt at its
    length limit and one character over: the same verdict for every case."""
    import json
    import shutil
    import subprocess
    from pathlib import Path

    from playground.generation.params import DEFAULTS, validate_params
    from playground.validation import InputError

    L = limits.for_browser()
    base = {"prompt": "Romeo", **{k: DEFAULTS[k] for k in ("max_new_tokens", "temperature", "top_k", "top_p", "seed")},
            "num_samples": 1}
    cases = [("prompt", "x" * L["MAX_PROMPT_CHARS"], True), ("prompt", "x" * (L["MAX_PROMPT_CHARS"] + 1), False)]
    for name, lo, hi, step, open_low in [("max_new_tokens", L["MIN_NEW_TOKENS"], L["MAX_NEW_TOKENS"], 1, False),
                                          ("temperature", L["MIN_TEMPERATURE"], L["MAX_TEMPERATURE"], 0.01, False),
                                          ("top_k", L["MIN_TOP_K"], L["MAX_TOP_K"], 1, False),
                                          ("top_p", L["MIN_TOP_P"], L["MAX_TOP_P"], 0.01, True),
                                          ("seed", L["MIN_SEED"], L["MAX_SEED"], 1, False),
                                          ("num_samples", L["MIN_SAMPLES"], L["MAX_SAMPLES"], 1, False)]:
        cases += [(name, lo, not open_low), (name, hi, True), (name, lo - step if not open_low else lo, False),
                  (name, hi + step, False)]
        if open_low:
            cases.append((name, lo + step, True))
    settings = [{**base, name: value} for name, value, _ in cases]
    script = ("import { settingsProblems } from './web/app/settings_checks.js';"
              "const { L, settings } = JSON.parse(process.argv[1]);"
              "console.log(JSON.stringify(settings.map((s) => settingsProblems(s, L))));")
    node = shutil.which("node")
    assert node, "node not found: the browser modules' tests need Node.js 20"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([node, "--input-type=module", "-e", script, json.dumps({"L": L, "settings": settings})],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    browser = json.loads(proc.stdout)

    def server_accepts(s: dict) -> bool:
        try:
            validate_params(**s, encode=lambda text: [1] * len(text), block_size=256, vocab_size=L["MAX_TOP_K"])
        except InputError:
            return False
        return True

    for (name, value, accepted), s, problems in zip(cases, settings, browser):
        shown = value if name != "prompt" else f"{len(value)} characters"
        assert server_accepts(s) is accepted, f"the server on {name} = {shown}"
        assert (problems == []) is accepted, f"the browser on {name} = {shown}: {problems}"


def test_the_browsers_watch_it_learn_checks_accept_and_refuse_what_the_servers_do_at_every_bound():
    """Watch it learn's checks in the browser (web/views/learn.js: ``problems`` on a run's settings,
    ``promptProblem`` on "Continue with your model"'s prompt), fed learn.json's limits and choices,
    under Node.js, and the server's (playground.learn.run.settings, and continue_text's text check):
    the seed at 0 and at its limit accepted, one past either refused; the prompt at its length limit
    accepted and one over refused, counted in code points as Python counts them (an emoji is one
    character); a whitespace-only prompt refused by both."""
    import json
    import shutil
    import subprocess
    from pathlib import Path

    from playground.learn import run
    from playground.validation import InputError, validate_text

    L = limits.for_browser()
    f = {"limits": L, "settings": {"inits": list(run.INITS), "learning_rates": run.LEARNING_RATES, "sizes": list(run.SIZES),
                                   "positions": list(run.POSITIONS)}}
    base = {"seed": 0, "init": run.INITS[0], "learning_rate": next(iter(run.LEARNING_RATES)), "size": next(iter(run.SIZES)),
            "positions": run.POSITIONS[0]}
    seeds = [0, L["MAX_LEARN_SEED"], -1, L["MAX_LEARN_SEED"] + 1]
    n = L["MAX_LEARN_PROMPT_CHARS"]
    prompts = ["x" * n, "x" * (n + 1), "x" * (n // 2) + "\N{GRINNING FACE}" * (n - n // 2),
               "x" * (n // 2) + "\N{GRINNING FACE}" * (n - n // 2 + 1), "  \n\t "]
    script = ("import { problems, promptProblem } from './web/views/learn.js';"
              "const { f, settings, prompts } = JSON.parse(process.argv[1]);"
              "console.log(JSON.stringify({ settings: settings.map((s) => problems(s, f)),"
              " prompts: prompts.map((p) => promptProblem(p, f)) }));")
    node = shutil.which("node")
    assert node, "node not found: the browser modules' tests need Node.js 20"
    root = Path(__file__).resolve().parents[2]
    settings = [{**base, "seed": seed} for seed in seeds]
    proc = subprocess.run([node, "--input-type=module", "-e", script, json.dumps({"f": f, "settings": settings, "prompts": prompts})],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    browser = json.loads(proc.stdout)

    def accepts(check, *args) -> bool:
        try:
            check(*args)
        except InputError:
            return False
        return True

    for seed, problems in zip(seeds, browser["settings"]):
        server = accepts(lambda s: run.settings(seed=s, **{k: v for k, v in base.items() if k != "seed"}), seed)
        assert (problems == []) is server, f"seed {seed}: the server {'accepts' if server else 'refuses'}, the browser says {problems}"
    assert [accepts(lambda s: run.settings(seed=s), s) for s in seeds] == [True, True, False, False]
    for prompt, problem in zip(prompts, browser["prompts"]):
        server = accepts(lambda p: validate_text(p, name="prompt", max_chars=run.MAX_PROMPT_CHARS), prompt)
        assert (problem is None) is server, f"a prompt of {len(prompt)} characters: the browser says {problem}"
    assert [p is None for p in browser["prompts"]] == [True, False, True, False, False]
