"""What the browser tests share: a JupyterLab or Notebook 7 server on 127.0.0.1 (started, waited
for and stopped by its PID), Debian's chromium driven by Playwright, and "Run > Run All Cells"."""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium")
                                        else None)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NO_NEWS = {"apputils-extension/notification.jupyterlab-settings":
           {"fetchNews": "false", "checkForUpdates": False}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


APPS = ("lab", "notebook")  # JupyterLab 4, Notebook 7 (`jupyter notebook`)
MODULE = {"lab": "jupyterlab", "notebook": "notebook"}


def has_app(app: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(MODULE[app]) is not None


def _data_path(env) -> str:
    """JUPYTER_PATH with the base Python's share/jupyter added: a venv made with
    --system-site-packages imports the base's jupyterlab_widgets and anywidget but does not look
    in the base's data directory for their labextensions (JupyterLab then has no widget manager:
    "Exception opening new comm" and text/plain outputs)."""
    paths = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    base = os.path.join(sys.base_prefix, "share", "jupyter")
    if sys.prefix != sys.base_prefix and os.path.isdir(base) and base not in paths:
        paths.append(base)
    return os.pathsep.join(paths)


@contextlib.contextmanager
def jupyterlab(root, tmp_path, env, settings=NO_NEWS, extra_args=(), app="lab"):
    """Start JupyterLab (``app="lab"``) or Notebook 7 (``app="notebook"``) on `root` (empty
    token), yield its URL, stop it by its PID.

    Args:
        env: the server's environment (the caller decides PYTHONPATH).
        settings: {"<plugin>/<file>.jupyterlab-settings": dict} under @jupyterlab (both apps
            read JupyterLab's settings directory).
    """
    for rel, value in settings.items():
        path = tmp_path / "settings" / "@jupyterlab" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = {**env, "JUPYTER_PATH": _data_path(env), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    port = free_port()
    log_path = tmp_path / "lab.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", MODULE[app], "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
         *extra_args],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/api/status", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"jupyter {app} exited:\n" + log_path.read_text())
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()  # the server this test started, by its PID
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextlib.contextmanager
def serve(app, root, tmp_path, settings=NO_NEWS):
    """:func:`jupyterlab` for the browser tests: skipped where ``app`` is not installed, this
    checkout's nbgrad first on the kernels' path, cross-site checks off (the tests call the REST
    API)."""
    import pytest

    if not has_app(app):
        pytest.skip(f"{MODULE[app]} is not installed")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with jupyterlab(root, tmp_path, env, settings=settings, app=app,
                    extra_args=["--ServerApp.disable_check_xsrf=True"]) as url:
        yield url


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)


def notebook_url(url, name, app="lab"):
    return f"{url}/lab/tree/{name}" if app == "lab" else f"{url}/notebooks/{name}"


def open_and_run_all(page, url, name, app="lab"):
    """Open notebook `name`, wait for the kernel, dismiss the news popup, Run > Run All Cells."""
    page.goto(notebook_url(url, name, app), wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    if app == "lab":
        page.get_by_text("| Idle").first.wait_for(timeout=60_000)  # the kernel is ready
    else:  # Notebook 7 has no status bar: its toolbar's kernel indicator
        page.locator("[data-status='idle']").first.wait_for(state="attached", timeout=60_000)
    no_news = page.get_by_role("button", name="No", exact=True)
    if no_news.count():
        no_news.first.click()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # A Run All sent before the page's kernel connection is ready runs nothing (seen in Notebook
    # 7 on a loaded machine: the kernel shown idle, every prompt left "[ ]:"); a cell that runs or
    # waits for the kernel shows "[*]:" or its count at once. Run All again only then.
    started = page.locator(".jp-InputPrompt", has_text=re.compile(r"\[(\*|\d+)\]"))
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            started.first.wait_for(timeout=30_000)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise
