"""The window's switch: the server shares the window's engine through the engine worker's queue.
A chat in the window and requests from the `openai` client run in turn (FIFO), never two at once
on the one engine; the server gives `llambda generate`'s text; the bar shows the address and a
live request count; switching off stops the server."""

from __future__ import annotations

import threading

import httpx
import openai
from PySide6.QtCore import Qt

from tests.server.test_clients import PROMPT, SETTINGS, generate_json
from tests.ui.conftest import drop_file

FAST = {"temperature": 0.0, "max_tokens": 16, "seed": 1}


def test_the_window_serves_its_model_and_shares_the_engine(qtbot, make_window, smollm2_path):
    w = make_window()  # the real engine
    w.state.put("sampling_defaults", FAST)
    bar = w.serve_bar
    assert not bar.switch.isEnabled() and not bar.address.isVisible()
    assert drop_file(w.chat.viewport(), str(smollm2_path))
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    assert bar.switch.isEnabled()

    # count the engine's generations, and any overlap (there must be none)
    eng = w.worker._engine.engine
    real_generate = eng.generate
    active, seen = [0], {"overlap": False, "runs": 0}

    def counting(request):
        active[0] += 1
        seen["overlap"] |= active[0] > 1
        seen["runs"] += 1
        try:
            yield from real_generate(request)
        finally:
            active[0] -= 1

    eng.generate = counting
    n_ctx = eng.n_ctx

    assert bar.start(0)  # any free port (the switch uses its spin box)
    assert bar.serving and bar.url.startswith("http://127.0.0.1:") and bar.address.text() == bar.url
    client = openai.OpenAI(base_url=bar.url, api_key="x", max_retries=0, timeout=120)
    results: dict = {}

    def ask():
        try:
            results["chat"] = client.chat.completions.create(
                model="x", messages=[{"role": "user", "content": PROMPT}], **SETTINGS
            )
            results["models"] = [m.id for m in client.models.list()]
            results["rebinding"] = httpx.get(bar.url + "/models", headers={"Host": "evil.example"}).status_code
        except Exception as e:  # reported by the assertion below
            results["error"] = e

    # a reply in the window and a request from another program, at the same time
    t = threading.Thread(target=ask)
    w.input.setPlainText("What is the capital of France?")
    qtbot.keyClick(w.input, Qt.Key_Return)
    t.start()
    qtbot.waitUntil(lambda: not t.is_alive() and not w.generating, timeout=180000)
    t.join()
    assert "error" not in results, results.get("error")
    assert not seen["overlap"] and seen["runs"] == 2
    assert w.state.messages()[-1].status == "complete"
    want = generate_json(
        str(smollm2_path),
        "--prompt",
        PROMPT,
        "--ctx",
        str(n_ctx),
        "--seed",
        str(SETTINGS["seed"]),
        "--temperature",
        str(SETTINGS["temperature"]),
        "--max-tokens",
        str(SETTINGS["max_tokens"]),
    )
    assert results["chat"].choices[0].message.content == want["text"]
    assert results["models"] == [bar.model_id] and results["rebinding"] == 403
    bar.refresh()
    assert bar.count.text() == "1 request" and bar.api.requests_served == 1

    # switching off: the address goes, nothing listens any more
    url = bar.url
    bar.switch.setChecked(True)
    bar.switch.setChecked(False)
    assert not bar.serving and not bar.address.isVisible()
    try:
        httpx.get(url + "/models", timeout=2)
        refused = False
    except httpx.TransportError:
        refused = True
    assert refused


def test_the_serve_menu_item_and_the_bar_stay_in_step(make_window):
    """File > Serve on localhost shows and hides the bar (app/ui/local_server.py); a server
    started from the bar ticks the item; hiding the bar stops the server."""
    from tests.ui.fake_engine import FakeEngine

    w = make_window(FakeEngine)
    bar, item = w.serve_bar, w.serve_action
    assert item.isCheckable() and not item.isChecked() and not bar.isVisible()
    item.trigger()
    assert item.isChecked() and bar.isVisible() and not bar.serving
    item.trigger()
    assert not item.isChecked() and not bar.isVisible()

    assert bar.start(0)  # as the switch does, on any free port
    assert bar.isVisible() and item.isChecked()
    bar.switch.blockSignals(True)
    bar.switch.setChecked(True)  # the switch that started it
    bar.switch.blockSignals(False)
    item.trigger()
    assert not item.isChecked() and not bar.isVisible() and not bar.serving and not bar.switch.isChecked()
