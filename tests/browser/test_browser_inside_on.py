"""Run on: this browser in the launched app's Inside the model tab (headless Chromium): the pass
computed in the page by the stage graph and the 8-bit weights the app wrote (web/app/inside_on.js),
drawn by the tab's own view, every number of every stage as PyTorch computes it on those very
weights (tests/inside_pages.py); the token slider spans the browser's text; a token chosen and
Shift+Enter in the text box ask the server nothing; back on the server, the server draws the pass
again. And the server's Run, when the server says its line for heavy passes is long, held and
offered this browser, with the wait in words."""

from __future__ import annotations

import json

import pytest

from browser_pages import page  # noqa: F401 -- fixture: a fresh app page
from conftest import wait_for
from inside_pages import Tolerance, check_against, shown
from test_browser import shots_dir, textbox  # noqa: F401 -- fixture of the app page
from test_browser_inside import info, set_slider, wait_info
from test_browser_page import open_tab

pytestmark = pytest.mark.browser

TEXT = "ROMEO.\nWhat say you, my lord?"
# The page against PyTorch on the weights it downloaded (the 8-bit file read back by numpy): rounding only.
SAME = Tolerance(value=1e-3, loss=1e-3)


@pytest.fixture(scope="module")
def same_weights():
    """PyTorch's model holding exactly the weights the app serves the page (its 8-bit file read back)."""
    from export.inside_graph import dequantized_model, read_weights
    from model import load_pretrained
    from playground.ui.startup import inside_folder

    folder = inside_folder()
    wait_for(lambda: (folder / "files.json").is_file(), 300, message="the app to write Inside's browser files")
    return dequantized_model(load_pretrained(), read_weights(folder / "weights.bin", folder / "weights.json"))


def joins(page) -> list[str]:
    """The queue's requests the page sends from now on (each a server event)."""
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "") if "/queue/join" in r.url else None)
    return sent


def slider_range(body: str) -> bool:
    """Whether a queue request is the browser's pass handing the token slider its range (and not a pass asked of the server)."""
    data = json.loads(body).get("data") or [None]
    try:
        return set(json.loads(data[0])) == {"tokens", "token"}
    except (TypeError, ValueError):
        return False


def computed_here(page) -> None:
    page.wait_for_function("() => (document.querySelector('#ins-info')?.innerText ?? '').includes('Computed in this browser')",
                           timeout=180_000)
    page.wait_for_function("() => !document.querySelector('.ins-view').dataset.pending")


def test_this_browser_computes_the_pass_pytorch_does_on_its_weights_and_asks_the_server_nothing(page, same_weights):  # noqa: F811
    from playground import inside as ins
    from model import get_tokenizer

    open_tab(page, "Inside the model")
    wait_info(page, "tokens; showing layer 0, head 0, token ")
    textbox(page, "ins-text").fill(TEXT)
    set_slider(page, "ins-layer", 2)
    sent = joins(page)
    page.locator('#ins-run-on input[value="browser"]').check()  # the text in the box is computed here at once
    computed_here(page)
    assert page.is_visible("#ins-run-browser") and not page.is_visible("#ins-run")
    ids = get_tokenizer().encode(TEXT)
    fp = ins.forward_pass(same_weights, ids)
    opening = ins.opening_token(fp)
    assert f"{len(ids)} tokens; showing layer 2, head 0, token {opening} " in info(page)
    check_against(shown(page), fp, SAME)
    # the token slider spans the browser's text (the one server event: the slider's range)
    box = page.locator("#ins-token input[type=number]")
    wait_for(lambda: box.get_attribute("max") == str(len(ids) - 1), 30, message="the token slider to span the text")
    assert box.input_value() == str(opening) and len(sent) == 1 and slider_range(sent[0])
    # another token: its logit lens run here, nothing asked of the server
    set_slider(page, "ins-token", len(ids) - 1)
    wait_info(page, f"token {len(ids) - 1} ")
    page.wait_for_function("() => !document.querySelector('.ins-view').dataset.pending")
    check_against(shown(page), fp, SAME)
    assert len(sent) == 1, sent
    # Shift+Enter in the text box runs here too
    textbox(page, "ins-text").fill("Good night.")
    textbox(page, "ins-text").press("Shift+Enter")
    page.wait_for_function("(n) => (document.querySelector('#ins-info')?.innerText ?? '').startsWith(n + ' tokens;')",
                           arg=len(get_tokenizer().encode("Good night.")))
    wait_for(lambda: len(sent) == 2, 30, message="the slider's range event")
    assert all(slider_range(body) for body in sent), "the server was asked for a pass"
    # bad input: the app's message, the last pass kept
    textbox(page, "ins-text").fill("  ")
    page.click("#ins-run-browser")
    page.locator("#ins-browser .pg-browser-error").wait_for(state="visible")
    assert "empty" in page.inner_text("#ins-browser .pg-browser-error")
    # back on the server: the server draws the pass again (its check against its own forward)
    textbox(page, "ins-text").fill(TEXT)
    page.locator('#ins-run-on input[value="server"]').check()
    wait_info(page, "Check: the last hidden state")
    assert "Computed in this browser" not in info(page) and page.is_visible("#ins-run")
    assert not page.errors, page.errors


def test_a_long_line_for_heavy_passes_offers_this_browser_at_once(page):  # noqa: F811
    """The server saying its heavy passes' line is long (its own answer for 4 busy handlers and 12
    passes before this visitor's): a click on Run sends nothing to the server and offers this
    browser, the wait in words; "Run it in this browser instead" computes it here."""
    from playground.ui.serving.wait import ExpectedPass, pass_answer

    long = pass_answer(ExpectedPass(handlers=4, running=4, line=30, ahead=12, pass_s=1.5))
    assert long["offer_browser"] and long["expected_wait_s"] == 7.5
    open_tab(page, "Inside the model")
    wait_info(page, "tokens; showing layer 0, head 0, token ")
    page.route("**/expected-wait*", lambda route: route.fulfill(
        status=200, content_type="application/json",
        body=json.dumps(long if "tab=inside" in route.request.url else {**long, "offer_browser": False, "expected_wait_s": 0})))
    sent = joins(page)
    textbox(page, "ins-text").fill(TEXT)
    page.locator("#ins-text textarea").focus()
    page.focus("#ins-run")  # the page asks the server's wait then
    page.wait_for_selector("#ins-server-wait[data-offer=true]", state="attached")
    assert page.inner_text("#ins-server-wait") == "The server now: about 7.5 s before the pass is drawn (this browser starts in seconds)."
    page.click("#ins-run")
    offer = page.locator("#ins-wait-offer")
    offer.wait_for()
    assert long["words"] in offer.inner_text() and "12 of the 30 passes waiting go before yours" in long["words"]
    assert not sent, "the click went to the server while the offer was shown"
    offer.get_by_role("button", name="Run it in this browser instead").click()
    computed_here(page)
    assert page.is_checked('#ins-run-on input[value="browser"]')
    assert all(slider_range(body) for body in sent), sent
    assert not page.errors, page.errors


def test_the_app_serves_inside_s_four_files_by_their_digests_and_names_them_in_files_json(tmp_path, shipped_onnx):
    """BrowserFiles.add_inside in-process: until the folder holds the four files the page is told
    why (the one missing named); then each is served immutable under its own ``?v=``, files.json
    (revalidated) names exactly those addresses, and a file written again gets a new address."""
    import hashlib

    from playground.ui.serving.browser_files import IMMUTABLE, REVALIDATE, BrowserFiles

    files = BrowserFiles.for_model(shipped_onnx)
    assert files.inside_code and not files.inside_available and "being written" in files.inside_problem
    assert files.inside_config()["facts"] == "browser/inside/files.json"
    for name in ("graph.onnx", "lens.onnx", "weights.bin"):
        (tmp_path / name).write_bytes(name.encode())
    files.add_inside(tmp_path)
    assert "weights.json is missing" in files.inside_problem and "/browser/inside/files.json" not in files.files
    (tmp_path / "weights.json").write_text("{}")
    files.add_inside(tmp_path)
    assert files.inside_available
    named = json.loads((tmp_path / "files.json").read_text())
    for name in ("graph.onnx", "lens.onnx", "weights.bin", "weights.json"):
        served = files.files[f"/browser/inside/{name}"]
        digest = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
        assert named[name] == f"browser/inside/{name}?v={digest[:16]}" and served.cache_control(digest[:16]) == IMMUTABLE
    assert files.files["/browser/inside/files.json"].cache_control(None) == REVALIDATE
    (tmp_path / "weights.bin").write_bytes(b"retrained")
    files.add_inside(tmp_path)
    assert json.loads((tmp_path / "files.json").read_text())["weights.bin"] != named["weights.bin"]
