"""pyacl_rt._options: every environment variable, good and bad values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyacl_rt import _options
from pyacl_rt._options import ENV_VARS, Options, get_options, parse_options, reload_options
from pyacl_rt.errors import AclError, ConfigError

ALL_NAMES = [v.name for v in ENV_VARS]


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ALL_NAMES:
        monkeypatch.delenv(name, raising=False)
    reload_options()
    yield monkeypatch
    for name in ALL_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.undo()
    reload_options()


def test_table_covers_every_option_field() -> None:
    assert {v.field for v in ENV_VARS} == set(Options._fields)
    assert len(set(ALL_NAMES)) == len(ALL_NAMES)
    required = {
        "PYACL_RT_BACKEND",
        "PYACL_RT_LIBRARY",
        "PYACL_RT_ACL_CONFIG",
        "PYACL_RT_LAZY_INIT",
        "PYACL_RT_CALLBACK_POLL_MS",
        "PYACL_RT_WARN_FALLBACK",
        "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_HOME_PATH",
        "ASCEND_TOOLKIT_HOME",
    }
    assert required <= set(ALL_NAMES)
    for var in ENV_VARS:
        assert var.description and var.accepted and var.type


def test_defaults(clean_env: pytest.MonkeyPatch) -> None:
    opts = parse_options({})
    assert opts == Options()
    assert opts.backend == "auto"
    assert opts.library is None
    assert opts.acl_config is None
    assert opts.lazy_init is True
    assert opts.callback_poll_ms == 100
    assert opts.warn_fallback is True
    assert opts.visible_devices is None
    # the table's defaults are the Options defaults
    for var in ENV_VARS:
        assert getattr(Options(), var.field) == var.default


def test_empty_value_counts_as_unset() -> None:
    assert parse_options({"PYACL_RT_BACKEND": "", "PYACL_RT_CALLBACK_POLL_MS": "  "}) == Options()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("auto", "auto"), ("real", "real"), ("mock", "mock"), ("MOCK", "mock"), (" real ", "real")],
)
def test_backend_good(raw: str, expected: str) -> None:
    assert parse_options({"PYACL_RT_BACKEND": raw}).backend == expected


@pytest.mark.parametrize("raw", ["fake", "cuda", "1", "mock,real"])
def test_backend_bad(raw: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_options({"PYACL_RT_BACKEND": raw})
    msg = str(ei.value)
    assert "PYACL_RT_BACKEND" in msg
    assert repr(raw) in msg
    for accepted in ("auto", "real", "mock"):
        assert accepted in msg
    assert ei.value.variable == "PYACL_RT_BACKEND"
    assert ei.value.value == raw
    assert isinstance(ei.value, ValueError)
    assert isinstance(ei.value, AclError)


def test_library_absolute(tmp_path: Path) -> None:
    lib = tmp_path / "lib64" / "libascendcl.so"
    assert parse_options({"PYACL_RT_LIBRARY": str(lib)}).library == str(lib)
    # normalised
    assert parse_options({"PYACL_RT_LIBRARY": str(tmp_path) + "/x/../libascendcl.so"}).library == (
        str(tmp_path / "libascendcl.so")
    )


@pytest.mark.parametrize("raw", ["libascendcl.so", "./libascendcl.so", "lib64/libascendcl.so"])
def test_library_relative_refused(raw: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_options({"PYACL_RT_LIBRARY": raw})
    msg = str(ei.value)
    assert "PYACL_RT_LIBRARY" in msg and repr(raw) in msg and "absolute path" in msg


def test_library_directory_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PYACL_RT_LIBRARY.*not a directory"):
        parse_options({"PYACL_RT_LIBRARY": str(tmp_path)})


def test_acl_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "acl.json"
    cfg.write_text("{}")
    assert parse_options({"PYACL_RT_ACL_CONFIG": str(cfg)}).acl_config == str(cfg)
    monkeypatch.chdir(tmp_path)
    # a relative path is resolved against the working directory at read time
    assert parse_options({"PYACL_RT_ACL_CONFIG": "acl.json"}).acl_config == str(cfg)
    with pytest.raises(ConfigError) as ei:
        parse_options({"PYACL_RT_ACL_CONFIG": str(tmp_path / "missing.json")})
    assert "PYACL_RT_ACL_CONFIG" in str(ei.value) and "existing JSON file" in str(ei.value)


@pytest.mark.parametrize("name", ["PYACL_RT_LAZY_INIT", "PYACL_RT_WARN_FALLBACK"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("0", False),
        ("true", True),
        ("False", False),
        ("yes", True),
        ("no", False),
        ("ON", True),
        ("off", False),
    ],
)
def test_bool_good(name: str, raw: str, expected: bool) -> None:
    field = next(v.field for v in ENV_VARS if v.name == name)
    assert getattr(parse_options({name: raw}), field) is expected


@pytest.mark.parametrize("name", ["PYACL_RT_LAZY_INIT", "PYACL_RT_WARN_FALLBACK"])
@pytest.mark.parametrize("raw", ["2", "maybe", "-1", "enabled"])
def test_bool_bad(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_options({name: raw})
    msg = str(ei.value)
    assert name in msg and repr(raw) in msg and "1/0" in msg


@pytest.mark.parametrize(("raw", "expected"), [("1", 1), ("100", 100), ("60000", 60000)])
def test_poll_ms_good(raw: str, expected: int) -> None:
    assert parse_options({"PYACL_RT_CALLBACK_POLL_MS": raw}).callback_poll_ms == expected


@pytest.mark.parametrize("raw", ["0", "-5", "60001", "1.5", "abc", "0x10"])
def test_poll_ms_bad(raw: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_options({"PYACL_RT_CALLBACK_POLL_MS": raw})
    msg = str(ei.value)
    assert "PYACL_RT_CALLBACK_POLL_MS" in msg and repr(raw) in msg and "1 to 60000" in msg


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("ASCEND_RT_VISIBLE_DEVICES", "visible_devices"),
        ("ASCEND_HOME_PATH", "ascend_home_path"),
        ("ASCEND_TOOLKIT_HOME", "ascend_toolkit_home"),
    ],
)
def test_passthrough(name: str, field: str) -> None:
    assert getattr(parse_options({name: "0,2"}), field) == "0,2"
    assert getattr(parse_options({}), field) is None


def test_options_frozen() -> None:
    opts = Options()
    with pytest.raises(AttributeError):
        opts.backend = "mock"  # type: ignore[misc]


def test_get_options_cached_and_reload(clean_env: pytest.MonkeyPatch) -> None:
    first = get_options()
    assert get_options() is first
    clean_env.setenv("PYACL_RT_CALLBACK_POLL_MS", "250")
    assert get_options() is first  # cached until reload
    second = reload_options()
    assert second.callback_poll_ms == 250
    assert get_options() is second


def test_reload_bad_keeps_previous(clean_env: pytest.MonkeyPatch) -> None:
    good = reload_options()
    clean_env.setenv("PYACL_RT_LAZY_INIT", "perhaps")
    with pytest.raises(ConfigError, match="PYACL_RT_LAZY_INIT"):
        reload_options()
    assert get_options() is good


def test_env_table_rows(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("PYACL_RT_CALLBACK_POLL_MS", "42")
    reload_options()
    rows = _options.env_table()
    assert [r["name"] for r in rows] == ALL_NAMES
    poll = next(r for r in rows if r["name"] == "PYACL_RT_CALLBACK_POLL_MS")
    assert poll["value"] == "42" and poll["effective"] == "42" and poll["default"] == "100"
    backend = next(r for r in rows if r["name"] == "PYACL_RT_BACKEND")
    assert backend["value"] == "unset" and backend["effective"] == "auto"


def test_env_table_reports_invalid(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("PYACL_RT_BACKEND", "nope")
    _options._cached = None
    rows = _options.env_table()
    assert all(r["effective"].startswith("invalid") for r in rows)


def test_markdown_table() -> None:
    md = _options.render_env_table_markdown()
    lines = md.strip().splitlines()
    assert len(lines) == 2 + len(ENV_VARS)
    for var in ENV_VARS:
        assert f"`{var.name}`" in md
    # every row has exactly 5 cells (no stray pipes inside cells)
    for line in lines:
        assert line.count("|") == 6, line


def test_docs_env_table_in_sync() -> None:
    """The environment table of docs/guides/scripting.md (it was the README's) is
    rendered from ENV_VARS (single source): regenerate it with
    ``pyacl-rt info --env --markdown``."""
    page = Path(__file__).resolve().parent.parent / "docs" / "guides" / "scripting.md"
    if not page.is_file():
        pytest.skip("no docs/ in this checkout")
    assert _options.render_env_table_markdown() in page.read_text(), (
        "docs/guides/scripting.md's environment-variable table is out of date: replace it "
        "with the output of `pyacl-rt info --env --markdown`"
    )
