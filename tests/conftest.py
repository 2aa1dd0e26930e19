import os
from pathlib import Path

import pytest


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run the slow dataset evaluations")
    parser.addoption("--runstress", action="store_true",
                     help="also run the long fuzzing and crash-kill campaigns (tens of minutes; not in CI)")


def pytest_collection_modifyitems(config, items):
    slow, stress = config.getoption("--runslow"), config.getoption("--runstress")
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow (CI does)")
    skip_stress = pytest.mark.skip(reason="stress: run with --runstress (not in CI: tens of minutes)")
    for item in items:
        if "stress" in item.keywords and not stress:
            item.add_marker(skip_stress)
        elif "slow" in item.keywords and not slow:
            item.add_marker(skip_slow)


BROWSER_FIX = "sudo .ci/install-chromium (Debian's chromium; `make install` runs it when root), then make test"


def browser_skips(reports) -> list:
    """The skipped reports of browser tests (marker ``browser``) skipped for a missing Chromium, Node or built page —
    not those left out on purpose (slow, stress)."""
    def reason(rep) -> str:
        return str(rep.longrepr[2]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)

    return [rep for rep in reports if "browser" in rep.keywords
            and not reason(rep).startswith(("Skipped: slow:", "Skipped: stress:", "slow:", "stress:"))]


def pytest_terminal_summary(terminalreporter):
    """A loud last line when browser tests were skipped: they pass silently otherwise (issue 35 B9)."""
    skipped = browser_skips(terminalreporter.stats.get("skipped", []))
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} BROWSER TESTS SKIPPED (Chromium, Node or the built page "
                                        f"missing): {BROWSER_FIX}", red=True, bold=True)


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The datasets root from PRIVFACE_DATA; tests that need it are skipped without it."""
    value = os.environ.get("PRIVFACE_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("PRIVFACE_DATA is not set to the datasets folder")
    return Path(value)


@pytest.fixture(scope="session")
def backend():
    """dlib-resnet128, named: the figures the tests using this fixture check are dlib's (the default backend is sface
    since issue 36; a test of sface makes its own)."""
    from privface.faces.registry import make_backend

    return make_backend("dlib-resnet128")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Tests never touch the user's embedding cache unless PRIVFACE_CACHE points somewhere on purpose."""
    if not os.environ.get("PRIVFACE_CACHE"):
        monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="session")
def demo_faces(backend):
    """dlib embeddings of the three embedded demo identities: {name: (reference, [altered copies])}."""
    from privface import demo_data

    photos = {"grace": demo_data.enrolled_photo()}
    photos.update({name.split()[0]: path for name, path in demo_data.impostor_photos().items()})
    out = {}
    for name, path in photos.items():
        copies = list(demo_data.altered_copies(path).values())[:1]
        out[name] = (backend.embed(path), [backend.embed(img) for img in copies])
    return out
