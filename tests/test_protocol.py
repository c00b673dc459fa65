"""The shared contract: paths, config, framing, messages and the snapshot schema."""

import os
import shutil
from pathlib import Path

import msgspec
import platformdirs
import pytest

from claude_autoharness.daemon.persist import document, quarantine
from claude_autoharness.daemon.persist.dirs import write_private
from claude_autoharness.daemon.persist.state import State
from claude_autoharness.protocol import framing, paths
from claude_autoharness.protocol import messages as m
from claude_autoharness.protocol.config import ConfigError, load

FIXTURES = Path(__file__).parent / "fixtures"


def test_home_layout(monkeypatch):
    """AUTOHARNESS_HOME=DIR puts config, state and socket under DIR."""
    monkeypatch.setenv("AUTOHARNESS_HOME", "/x/h")
    monkeypatch.delenv("AUTOHARNESS_SOCKET", raising=False)
    monkeypatch.delenv("AUTOHARNESS_CONFIG", raising=False)
    assert paths.config_file() == "/x/h/config.toml"
    assert paths.state_dir() == "/x/h/state"
    assert paths.socket_path() == "/x/h/run/autoharness.sock"
    monkeypatch.setenv("AUTOHARNESS_SOCKET", "/s/a.sock")
    assert paths.socket_path() == "/s/a.sock"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/c")
    assert paths.user_skills_dir() == "/c/skills"
    assert paths.claude_projects_dir() == "/c/projects"


def test_defaults_mirror_platformdirs(monkeypatch):
    """Without overrides, config and state dirs equal platformdirs' (mirrored, not imported)."""
    for var in ("AUTOHARNESS_HOME", "AUTOHARNESS_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    assert paths.config_dir() == platformdirs.user_config_dir("autoharness")
    assert paths.state_dir() == platformdirs.user_state_dir("autoharness")
    monkeypatch.setenv("XDG_STATE_HOME", "/xdg/state")
    assert paths.state_dir() == platformdirs.user_state_dir("autoharness")


def test_runtime_dir_socket(monkeypatch):
    """Without AUTOHARNESS_HOME the socket lives under $XDG_RUNTIME_DIR/autoharness."""
    for var in ("AUTOHARNESS_HOME", "AUTOHARNESS_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    if os.uname().sysname == "Linux":
        assert paths.socket_path() == "/run/user/1000/autoharness/autoharness.sock"


def test_project_slug():
    """Every non-alphanumeric character of the project path becomes '-'."""
    assert paths.project_slug("/home/user/my_proj.v2") == "-home-user-my-proj-v2"


def test_config_defaults_and_env(tmp_path):
    """Defaults apply; AUTOHARNESS_<NAME> and AUTOHARNESS_<SECTION>_<NAME> override the file."""
    f = tmp_path / "c.toml"
    f.write_text("reflect_every = 10\n[reflector]\nbackend = 'none'\n")
    cfg = load(str(f), env={})
    assert cfg.reflect_every == 10 and cfg.reflector.backend == "none"
    assert cfg.persist_interval_s == 2.0 and cfg.capture.max_window_bytes == 200_000
    cfg = load(str(f), env={"AUTOHARNESS_REFLECT_EVERY": "7",
                            "AUTOHARNESS_REFLECTOR_BACKEND": "claude",
                            "AUTOHARNESS_AUTOSTART": "0"})
    assert (cfg.reflect_every, cfg.reflector.backend, cfg.autostart) == (7, "claude", False)


@pytest.mark.parametrize("text,key", [
    ("reflect_every = 'many'", "reflect_every"),
    ("reflect_every = -1", "reflect_every"),
    ("[reflector]\nbackend = 'gpt'", "backend"),
    ("no_such_key = 1", "no_such_key"),
    ("[capture]\nmax_window_bytes = 0", "max_window_bytes"),
    ("this is not toml", "TOML"),
])
def test_invalid_config_names_the_key(tmp_path, text, key):
    """Invalid config raises ConfigError naming the offending key."""
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=key):
        load(str(f), env={})


def test_invalid_env_override_names_the_key(tmp_path):
    """A bad env override is an error too, not a silent default."""
    with pytest.raises(ConfigError, match="reflect_every"):
        load(str(tmp_path / "none.toml"), env={"AUTOHARNESS_REFLECT_EVERY": "lots"})


def test_frames_round_trip_and_bound():
    """Frames carry a 4-byte big-endian length; MAX_FRAME is enforced both ways."""
    body = m.encode(m.Status())
    f = framing.frame(body)
    assert framing.frame_length(f[:4]) == len(body) and f[4:] == body
    with pytest.raises(framing.FrameError):
        framing.frame_length((framing.MAX_FRAME + 1).to_bytes(4, "big"))
    assert framing.MAX_FRAME >= 16 * 1024 * 1024  # multi-MB Write payloads must fit


def test_tagged_messages_decode_to_their_types():
    """Requests decode by their `type` tag; unknown tags and missing fields are errors."""
    req = m.request_decoder.decode(b'{"type":"flush","v":1,"session_ids":["a"],"extra":1}')
    assert isinstance(req, m.Flush) and req.session_ids == ["a"]
    hook = m.request_decoder.decode(b'{"type":"hook","v":1,"payload":{"x":[1,2]}}')
    assert isinstance(hook, m.Hook) and bytes(hook.payload) == b'{"x":[1,2]}'
    with pytest.raises(msgspec.ValidationError):
        m.request_decoder.decode(b'{"type":"bogus","v":1}')
    with pytest.raises(msgspec.ValidationError):
        m.request_decoder.decode(b'{"type":"learn","v":1}')
    err = m.reply_decoder.decode(m.encode(m.Error(code="x", message="y")))
    assert isinstance(err, m.Error) and err.code == "x"


def test_old_snapshot_still_loads(home, tmp_path):
    """A snapshot written by version 1 of the schema loads into today's State."""
    snap = tmp_path / "snapshot.json"
    shutil.copyfile(FIXTURES / "snapshot_v1.json", snap)
    state = document.load(str(snap), State, previous=str(tmp_path / "snapshot.prev.json"))
    assert state is not None and quarantine.files() == []
    s = state.sessions["c45af7b1-cb7c-4e51-93db-8cbb250a877a"]
    assert (s.activity, s.watermark) == (12, 4096)
    assert state.jobs["0123456789abcdef"].status == "pending"
    assert state.events.by_kind["PreToolUse"] == 80


def test_private_writes(tmp_path):
    """State files are written 0600 and atomically (no temp left behind)."""
    p = tmp_path / "f.json"
    write_private(str(p), b"x" * 100_000)
    assert p.read_bytes() == b"x" * 100_000
    assert p.stat().st_mode & 0o777 == 0o600
    assert [x.name for x in tmp_path.iterdir()] == ["f.json"]


def _hook_module():
    """The hook client's module (what the `autoharness-hook` script runs)."""
    from claude_autoharness.client import hook

    return hook


def test_hook_frames_with_the_protocols_own_bytes(monkeypatch):
    """The hook's hand-built request decodes as the protocol's `Hook` at the protocol's
    version, and its frame is byte for byte `framing.frame`'s; both follow the constants."""
    from claude_autoharness.protocol import PROTOCOL, framing

    hook = _hook_module()
    raw = b'{"session_id": "s", "hook_event_name": "Stop"}\n'
    body = hook.envelope(raw, 1234.5, b"ab" * 16)
    req = m.request_decoder.decode(body)
    assert isinstance(req, m.Hook) and req.v == PROTOCOL and req.ts == 1234.5
    assert req.id == "ab" * 16
    assert msgspec.json.decode(req.payload) == {"session_id": "s", "hook_event_name": "Stop"}
    assert hook.frame(body) == framing.frame(body)
    import claude_autoharness.protocol as protocol

    assert framing.HEADER == protocol.FRAME_HEADER
    monkeypatch.setattr(protocol, "FRAME_HEADER", 8)  # a changed constant changes the frame
    assert hook.frame(body) == len(body).to_bytes(8, "big") + body
    monkeypatch.setattr(protocol, "PROTOCOL", 7)
    assert msgspec.json.decode(hook.envelope(raw, 1.0, b"cd" * 16))["v"] == 7


def test_spool_record_names_sort_by_time():
    """A spool record's name starts with the hook's time, zero-padded: sorting names replays
    records in the order hooks wrote them."""
    from claude_autoharness.protocol import spool

    names = [spool.record_name(ns, "x") for ns in (10**18, 9 * 10**17, 10**18 + 1, 0)]
    assert sorted(names) == [names[3], names[1], names[0], names[2]]


@pytest.mark.parametrize("req", [b'{"type":"queue","op":"nuke"}',
                                 b'{"type":"skills","op":"delete","name":"x"}',
                                 b'{"type":"learnings","op":"forget","project":"/p"}',
                                 b'{"type":"batch","op":"resubmit"}'])
def test_unknown_sub_operations_are_refused_at_decoding(req):
    """Sub-operations are literals: a value no handler serves never reaches one."""
    with pytest.raises(msgspec.ValidationError):
        m.request_decoder.decode(req)


def test_every_sub_operation_decodes():
    for tag, ops in (("queue", m.QueueOp), ("skills", m.SkillsOp), ("learnings", m.LearningsOp),
                     ("batch", m.BatchOp)):
        for op in ops.__args__:
            assert m.request_decoder.decode(msgspec.json.encode({"type": tag, "op": op})).op == op


def test_make_private_dirs_makes_every_missing_parent_private(tmp_path):
    """Each directory `make_private_dirs` creates is 0700 under the usual umask (022), not only
    the last one; an existing parent keeps its mode; a second call is a no-op."""
    old = os.umask(0o022)
    try:
        (tmp_path / "exists").mkdir(mode=0o755)
        target = tmp_path / "exists" / "a" / "b" / "c"
        paths.make_private_dirs(str(target))
        paths.make_private_dirs(str(target))
    finally:
        os.umask(old)
    for d in ("a", "a/b", "a/b/c"):
        assert (tmp_path / "exists" / d).stat().st_mode & 0o777 == 0o700, d
    assert (tmp_path / "exists").stat().st_mode & 0o777 == 0o755


def test_make_private_dirs_refuses_a_file_in_the_way(tmp_path):
    """A file where a directory should be is an error, never silently replaced."""
    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError):
        paths.make_private_dirs(str(tmp_path / "f" / "sub"))
