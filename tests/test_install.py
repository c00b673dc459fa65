"""`autoharnessctl install`: settings.json wiring, idempotence, removal, backups, commands, the
plugin layout. Every test works on a temp CLAUDE_CONFIG_DIR / project, never the real ~/.claude."""

import json
import os
import re
import stat
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from claude_autoharness.client import settings as settings_mod
from claude_autoharness.protocol import VERSION
from conftest import REPO
from harness import CTL, HOOK, Daemon, pre_tool, wait_for

# the slash commands as installed (package data mapped from the repository's commands/)
PKG_COMMANDS = resources.files("claude_autoharness.client") / "commands"
# what install writes: the hook's own interpreter with -I -S, guarded against a vanished install
HOOK_PYTHON = settings_mod.script_python(HOOK)
HOOK_CMD = settings_mod.settings_command(HOOK, HOOK_PYTHON)


def run(*args, cwd, env=None):
    """The real CLI, from a directory outside any git checkout (so no project settings leak in)."""
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env=dict(os.environ, **(env or {})))


def settings_file(home) -> Path:
    return home["claude"] / "settings.json"


def write_json(path: Path, data) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = settings_mod.dumps(data).encode()
    path.write_bytes(raw)
    return raw


def backups(home) -> list[Path]:
    d = home["home"] / "state" / "install" / "backups"
    return sorted(d.iterdir()) if d.exists() else []


def counting_groups(settings) -> list[dict]:
    return [g for g in settings["hooks"]["PreToolUse"]
            if any(settings_mod.is_counting(h["command"]) for h in g["hooks"])]


USER_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionStart": [{"hooks": [{"type": "command", "command": "echo hello"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-bash-guard",
                                           "timeout": 3}]},
            {"hooks": [{"type": "command", "command": "log-every-tool"}]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt"}]}],
    },
    "env": {"FOO": "bar"},
}


def test_install_without_settings_file(home):
    """No settings.json: one is created with SessionStart (sync), one matcher-less async
    PreToolUse group, Stop (sync: `claude -p` kills async hooks at exit), SessionEnd (sync,
    within its 1.5 s budget) running the absolute installed hook, plus the synchronous child
    write guard and check hook; the commands are copied."""
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    s = json.loads(settings_file(home).read_text())
    hooks = s["hooks"]
    assert list(hooks) == ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"]
    hook_cmd = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert hook_cmd == HOOK_CMD and settings_mod.hook_program(hook_cmd) == HOOK
    assert os.access(HOOK, os.X_OK) and HOOK_PYTHON and settings_mod.hook_interpreter(hook_cmd) == HOOK_PYTHON
    start = hooks["SessionStart"][0]["hooks"][0]
    assert not start.get("async") and start["timeout"] <= 10
    counting = counting_groups(s)
    assert len(counting) == 1 and "matcher" not in counting[0]
    assert counting[0]["hooks"] == [{"type": "command", "command": HOOK_CMD, "async": True,
                                     "timeout": settings_mod.ASYNC_TIMEOUT}]
    guard, check = [g for g in hooks["PreToolUse"] if g.get("matcher")]
    assert guard["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    assert not guard["hooks"][0].get("async")
    # the check hook: synchronous (it decides), only for the tools a check can name, and
    # the same program in check mode
    assert check["matcher"] == "Bash|Edit|MultiEdit|Write|NotebookEdit|Read"
    assert not check["hooks"][0].get("async")
    assert check["hooks"][0]["command"] == HOOK_CMD.replace(
        "AUTOHARNESS_VIA=settings ", "AUTOHARNESS_VIA=settings AUTOHARNESS_HOOK=check ")
    stop = hooks["Stop"][0]["hooks"][0]
    assert not stop.get("async") and stop["timeout"] == settings_mod.STOP_TIMEOUT
    end = hooks["SessionEnd"][0]["hooks"][0]
    assert not end.get("async") and end["timeout"] <= 1.5
    for name in ("learn.md", "save-learnings.md"):
        installed = (home["claude"] / "commands" / name).read_bytes()
        assert installed == (PKG_COMMANDS / name).read_bytes()


def test_user_hooks_and_settings_are_kept(home):
    """The user's own hooks on the same events, and every other setting, keep their content and
    order; autoharness's groups come after them."""
    write_json(settings_file(home), USER_SETTINGS)
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    s = json.loads(settings_file(home).read_text())
    assert list(s) == list(USER_SETTINGS)
    for key in ("model", "permissions", "env"):
        assert s[key] == USER_SETTINGS[key]
    for event, groups in USER_SETTINGS["hooks"].items():
        assert s["hooks"][event][:len(groups)] == groups, event
    assert s["hooks"]["PostToolUse"] == USER_SETTINGS["hooks"]["PostToolUse"]
    assert len(counting_groups(s)) == 1


def test_second_run_changes_nothing(home):
    """Running install twice leaves the file byte-identical, says "no change", backs up nothing."""
    write_json(settings_file(home), USER_SETTINGS)
    assert run("install", cwd=home["tmp"]).returncode == 0
    first = settings_file(home).read_bytes()
    n_backups = len(backups(home))
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert "no change" in r.stdout
    assert settings_file(home).read_bytes() == first
    assert len(backups(home)) == n_backups


def test_stale_entries_are_replaced(home):
    """Entries of another installation (other path, older layout on other events, module form)
    are recognised by the hook's name and replaced; the user's hooks stay."""
    stale = json.loads(json.dumps(USER_SETTINGS))
    stale["hooks"]["PreToolUse"].append(
        {"hooks": [{"type": "command", "command": "/opt/old/venv/bin/autoharness-hook"}]})
    stale["hooks"]["PostToolUse"].append(
        {"hooks": [{"type": "command", "command": "'/old dir/bin/autoharness-hook'"}]})
    stale["hooks"]["Notification"] = [
        {"hooks": [{"type": "command", "command": "python -m claude_autoharness.client.hook"}]}]
    write_json(settings_file(home), stale)
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    text = settings_file(home).read_text()
    assert "/opt/old" not in text and "/old dir" not in text and "-m autoharness" not in text
    s = json.loads(text)
    assert "Notification" not in s["hooks"]  # only autoharness was in it
    assert s["hooks"]["PostToolUse"] == USER_SETTINGS["hooks"]["PostToolUse"]
    assert s["hooks"]["PreToolUse"][:2] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert [g["hooks"][0]["command"] for g in counting_groups(s)] == [HOOK_CMD]


def test_reinstall_makes_an_async_stop_synchronous(home):
    """An earlier install's async Stop hook (lost at `claude -p` exit) becomes synchronous when
    install runs again; nothing else of the user's changes."""
    assert run("install", cwd=home["tmp"]).returncode == 0
    s = json.loads(settings_file(home).read_text())
    s["hooks"]["Stop"][0]["hooks"][0]["async"] = True
    write_json(settings_file(home), s)
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    stop = json.loads(settings_file(home).read_text())["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": HOOK_CMD,
                                "timeout": settings_mod.STOP_TIMEOUT}]}]


def test_malformed_settings_are_never_overwritten(home):
    """Malformed JSON: exit 1 with an error naming the file and position; nothing written."""
    bad = b'{\n  "model": "opus",\n  "hooks": {,\n}\n'
    settings_file(home).write_bytes(bad)
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 1
    assert str(settings_file(home)) in r.stderr and "not valid JSON" in r.stderr
    assert "line 3" in r.stderr
    assert settings_file(home).read_bytes() == bad
    assert not (home["claude"] / "commands").exists()
    assert backups(home) == []
    assert run("install", "--remove", cwd=home["tmp"]).returncode == 1
    assert settings_file(home).read_bytes() == bad


def test_remove_is_the_exact_inverse(home):
    """install then --remove gives back the original JSON (byte-identical when it was written
    in the same style), the user's hooks intact, the commands and their directory gone."""
    original = write_json(settings_file(home), USER_SETTINGS)
    assert run("install", cwd=home["tmp"]).returncode == 0
    r = run("install", "--remove", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert json.loads(settings_file(home).read_text()) == USER_SETTINGS
    assert settings_file(home).read_bytes() == original
    assert not (home["claude"] / "commands").exists()
    again = run("install", "--remove", cwd=home["tmp"])
    assert again.returncode == 0 and "no change" in again.stdout


@pytest.mark.parametrize("original", [
    None,
    {"model": "opus"},
    {"model": "opus", "hooks": {}},
    {"hooks": {"PreToolUse": [], "Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}},
], ids=["no-file", "no-hooks-key", "empty-hooks", "empty-event-list"])
def test_remove_deletes_only_containers_it_created(home, original):
    """Empty event lists and the `hooks` key (and the file itself) are removed by --remove only
    if install created them; ones the user had stay, even empty."""
    if original is not None:
        write_json(settings_file(home), original)
    assert run("install", cwd=home["tmp"]).returncode == 0
    assert run("install", "--remove", cwd=home["tmp"]).returncode == 0
    if original is None:
        assert not settings_file(home).exists()
    else:
        assert json.loads(settings_file(home).read_text()) == original


def test_dry_run_writes_nothing(home):
    """--dry-run prints the planned changes and a diff, and writes no file, backup or record."""
    raw = write_json(settings_file(home), USER_SETTINGS)
    r = run("install", "--dry-run", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert "would update" in r.stdout and "would create" in r.stdout
    assert f"+{' ' * 12}\"command\": {json.dumps(HOOK_CMD)}," in r.stdout  # the hook line
    assert settings_file(home).read_bytes() == raw
    assert not (home["claude"] / "commands").exists()
    assert not (home["home"] / "state" / "install").exists()


def test_backup_is_kept_before_a_change(home):
    """The file as it was is kept (timestamped, private) before install and before --remove."""
    raw = write_json(settings_file(home), USER_SETTINGS)
    os.chmod(settings_file(home), 0o640)
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    (b,) = backups(home)
    assert b.read_bytes() == raw
    assert re.search(r"\.\d{8}T\d{6}", b.name)
    assert stat.S_IMODE(b.stat().st_mode) == 0o600
    assert str(b) in r.stdout
    assert stat.S_IMODE(settings_file(home).stat().st_mode) == 0o640  # mode kept
    installed = settings_file(home).read_bytes()
    assert run("install", "--remove", cwd=home["tmp"]).returncode == 0
    assert installed in [p.read_bytes() for p in backups(home)]


def test_symlinked_settings_stay_a_symlink(home):
    """A settings.json that is a symlink (dotfile managers) is written through, not replaced."""
    real = home["tmp"] / "dotfiles" / "settings.json"
    write_json(real, {"model": "opus"})
    settings_file(home).symlink_to(real)
    assert run("install", cwd=home["tmp"]).returncode == 0
    assert settings_file(home).is_symlink()
    assert "hooks" in json.loads(real.read_text())


def test_commands_are_installed_and_own_files_protected(home):
    """The commands land in $CLAUDE_CONFIG_DIR/commands; a user's own learn.md is never
    replaced without --force (and then it is backed up)."""
    mine = home["claude"] / "commands" / "learn.md"
    mine.parent.mkdir()
    mine.write_text("my own learn command\n")
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 1 and "learn.md" in r.stderr and "--force" in r.stderr
    assert mine.read_text() == "my own learn command\n"
    assert not settings_file(home).exists()
    r = run("install", "--force", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert mine.read_bytes() == (PKG_COMMANDS / "learn.md").read_bytes()
    assert any(p.read_text() == "my own learn command\n" for p in backups(home))


def test_project_scope(home):
    """--scope project writes <project>/.claude/settings.json and .claude/commands, not the
    user's settings."""
    project = home["tmp"] / "proj"
    project.mkdir()
    r = run("install", "--scope", "project", "--project", str(project), cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    s = json.loads((project / ".claude" / "settings.json").read_text())
    assert len(counting_groups(s)) == 1
    assert (project / ".claude" / "commands" / "learn.md").exists()
    assert not settings_file(home).exists()
    r = run("install", "--scope", "project", "--project", str(project), "--remove",
            cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert not (project / ".claude").exists()


def test_plugin_enabled_is_refused(home):
    """With the autoharness plugin enabled, install refuses (both sets of hooks would run for
    every event) and says how to proceed; --force overrides."""
    raw = write_json(settings_file(home), {"enabledPlugins": {"autoharness@autoharness": True}})
    r = run("install", cwd=home["tmp"])
    assert r.returncode == 1
    assert "plugin" in r.stderr and "both run" in r.stderr and "--force" in r.stderr
    assert settings_file(home).read_bytes() == raw
    r = run("install", "--force", cwd=home["tmp"])
    assert r.returncode == 0, r.stderr
    assert len(counting_groups(json.loads(settings_file(home).read_text()))) == 1


def test_other_scope_already_installed_is_refused(home):
    """Hooks already in the user settings: a project install would double count, so it is
    refused with the command that fixes it."""
    project = home["tmp"] / "proj"
    project.mkdir()
    assert run("install", cwd=home["tmp"]).returncode == 0
    r = run("install", "--scope", "project", "--project", str(project), cwd=home["tmp"])
    assert r.returncode == 1
    assert "install --remove --scope user" in r.stderr
    assert not (project / ".claude").exists()


def test_child_guard_decides_from_the_environment_alone():
    """The guard command (run by a shell, no Python) prints a PreToolUse deny only when
    AUTOHARNESS_CHILD_SESSION=1, never for Claude Code's own CLAUDE_CODE_CHILD_SESSION, and
    always exits 0."""
    base = {"PATH": os.defpath}
    r = subprocess.run(["/bin/sh", "-c", settings_mod.CHILD_GUARD], input=b"{}", capture_output=True,
                       env=dict(base, AUTOHARNESS_CHILD_SESSION="1"))
    assert r.returncode == 0
    out = json.loads(r.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    for env in (base, dict(base, CLAUDE_CODE_CHILD_SESSION="1")):
        r = subprocess.run(["/bin/sh", "-c", settings_mod.CHILD_GUARD], input=b"{}", capture_output=True,
                           env=env)
        assert r.returncode == 0 and r.stdout == b""


def _matches(group: dict, tool: str) -> bool:
    m = group.get("matcher")
    return not m or m == "*" or re.fullmatch(m, tool) is not None


def _run_hooks(settings: dict, payload: dict, env: dict) -> list[bytes]:
    """Run every PreToolUse command that Claude Code would run for this tool, as it would."""
    outs = []
    for g in settings["hooks"]["PreToolUse"]:
        if _matches(g, payload["tool_name"]):
            for h in g["hooks"]:
                r = subprocess.run(["/bin/sh", "-c", h["command"]],
                                   input=json.dumps(payload).encode(), capture_output=True,
                                   env=env, timeout=90)
                assert r.returncode == 0
                outs.append(r.stdout)
    return outs


def test_installed_hooks_count_each_call_once(home):
    """Running the installed PreToolUse groups as Claude Code would: a main session's Write is
    counted exactly once; a reflector child's Write is denied and counts nothing."""
    assert run("install", cwd=home["tmp"]).returncode == 0
    s = json.loads(settings_file(home).read_text())
    d = Daemon(home["home"])
    try:
        env = dict(os.environ)
        _run_hooks(s, pre_tool("main-1", "Write"), env)
        wait_for(lambda: any(x["session_id"] == "main-1" and x["activity"] == 1
                             for x in d.status()["sessions"]), what="one count")
        outs = _run_hooks(s, pre_tool("child-1", "Write"),
                          dict(env, AUTOHARNESS_CHILD_SESSION="1"))
        denies = [json.loads(o) for o in outs if b"deny" in o]
        assert denies and denies[0]["hookSpecificOutput"]["permissionDecision"] == "deny"
        st = d.status()
        assert not any(x["session_id"] == "child-1" for x in st["sessions"])
        assert [x["activity"] for x in st["sessions"] if x["session_id"] == "main-1"] == [1]
    finally:
        d.stop()


def test_plugin_layout_matches_package_data():
    """The repository works as a Claude Code plugin: its commands are byte-identical to the
    package data, its hooks.json is what the installer would write for the plugin (hook from
    PATH), and plugin.json names autoharness at this version."""
    for name in settings_mod.COMMANDS:
        assert (REPO / "commands" / name).read_bytes() == (PKG_COMMANDS / name).read_bytes()
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    assert hooks == settings_mod.hook_groups(settings_mod.PLUGIN_HOOK)
    manifest = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "autoharness" and manifest["version"] == VERSION
    assert all(settings_mod.is_ours(h["command"]) for groups in hooks.values() for g in groups
               for h in g["hooks"])


def test_plugin_hooks_run_the_shim_shipped_in_the_plugin():
    """The plugin's counting hooks run `${CLAUDE_PLUGIN_ROOT}/hooks/run-hook`;
    the shim is in the repository and executable; the child write guard stays inline as the
    installer writes it."""
    shim = REPO / settings_mod.PLUGIN_SHIM
    assert os.access(shim, os.X_OK) and shim.stat().st_mode & 0o111 == 0o111
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    cmds = [h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]
    assert sum(c == '"${CLAUDE_PLUGIN_ROOT}/hooks/run-hook"' for c in cmds) == 5
    assert [c for c in cmds if "CLAUDE_PLUGIN_ROOT" not in c] == [settings_mod.CHILD_GUARD]
    assert [g for g in hooks["PreToolUse"] if "matcher" not in g] == [
        {"hooks": [{"type": "command", "command": settings_mod.PLUGIN_HOOK, "async": True,
                    "timeout": settings_mod.ASYNC_TIMEOUT}]}]
    assert hooks["Stop"] == [{"hooks": [{"type": "command", "command": settings_mod.PLUGIN_HOOK,
                                         "timeout": settings_mod.STOP_TIMEOUT}]}]


def run_plugin_hook(path_dirs, stdin=b'{"hook_event_name":"PreToolUse"}'):
    """The plugin hook command as Claude Code runs it: through sh, CLAUDE_PLUGIN_ROOT set."""
    return subprocess.run(["/bin/sh", "-c", settings_mod.PLUGIN_HOOK], input=stdin,
                          capture_output=True, timeout=90,
                          env={"PATH": os.pathsep.join(map(str, path_dirs)),
                               "CLAUDE_PLUGIN_ROOT": str(REPO)})


def test_plugin_shim_is_silent_without_autoharness(short_tmp):
    """Without `autoharness-hook` on PATH the shim exits 0 and prints nothing (a hook must
    never fail Claude Code's tool call)."""
    empty = short_tmp / "empty-bin"
    empty.mkdir()
    for dirs in ([empty], [empty, "/usr/bin", "/bin"]):
        r = run_plugin_hook(dirs)
        assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), r


def test_plugin_shim_runs_autoharness_hook_from_path(short_tmp):
    """With an `autoharness-hook` on PATH the shim execs it with AUTOHARNESS_VIA=plugin: the
    event reaches its stdin and its output and exit status pass straight through."""
    bindir = short_tmp / "fake-bin"
    bindir.mkdir()
    fake = bindir / "autoharness-hook"
    fake.write_text("#!/bin/sh\nprintf 'fake-hook (%s) saw: ' \"$AUTOHARNESS_VIA\"\ncat\n"
                    "printf '\\nto-stderr' >&2\nexit 3\n")
    fake.chmod(0o755)
    r = run_plugin_hook([bindir, "/usr/bin", "/bin"], stdin=b'{"x":1}')
    assert r.stdout == b'fake-hook (plugin) saw: {"x":1}' and r.stderr == b"\nto-stderr"
    assert r.returncode == 3  # exec'd: the shim adds nothing of its own


def test_commands_reference_the_cli():
    """/learn gives the model one literal command: the session id Claude Code substitutes, and
    the lesson it substitutes inside a quoted heredoc read from stdin (no `$VAR`, `${VAR}` or
    `$(...)` expansion, which Claude Code's Bash permission checker refuses);
    /save-learnings runs `autoharnessctl learnings save`; both have a description; the plugin's
    top-level commands/ ships the same files as the package."""
    learn = (PKG_COMMANDS / "learn.md").read_text()
    block = learn.split("```bash\n", 1)[1].split("\n```", 1)[0]
    assert block == ("autoharnessctl learn --session ${CLAUDE_SESSION_ID} - "
                     "<<'AUTOHARNESS_LESSON_${CLAUDE_SESSION_ID}'\n"
                     "$ARGUMENTS\nAUTOHARNESS_LESSON_${CLAUDE_SESSION_ID}")
    assert "allowed-tools: Bash(autoharnessctl learn:*)\n" in learn
    save = (PKG_COMMANDS / "save-learnings.md").read_text()
    assert "!`autoharnessctl learnings save`" in save
    for text in (learn, save):
        assert text.startswith("---\ndescription: ")
    for name in ("learn.md", "save-learnings.md"):
        assert (REPO / "commands" / name).read_bytes() == (PKG_COMMANDS / name).read_bytes()


def run_learn_command(tmp, lesson: str, sid: str) -> tuple[list[str], bytes]:
    """The /learn command as the model runs it: the command text with Claude Code's two
    substitutions made ($ARGUMENTS, ${CLAUDE_SESSION_ID}), its bash block run by bash with an
    `autoharnessctl` on PATH that records its arguments and stdin."""
    text = (PKG_COMMANDS / "learn.md").read_text()
    text = text.replace("$ARGUMENTS", lesson).replace("${CLAUDE_SESSION_ID}", sid)
    block = text.split("```bash\n", 1)[1].split("\n```", 1)[0]
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    stub = bindir / "autoharnessctl"
    stub.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp}/argv\ncat > {tmp}/stdin\n")
    stub.chmod(0o755)
    r = subprocess.run(["bash", "-c", block], capture_output=True, timeout=90, cwd=tmp,
                       env={"PATH": f"{bindir}:/usr/bin:/bin"})
    assert not (tmp / "escaped").exists()  # no lesson line ran as a command
    assert r.returncode == 0 and r.stderr == b"", r
    return (tmp / "argv").read_text().splitlines(), (tmp / "stdin").read_bytes()


@pytest.mark.parametrize("lesson", [
    "AUTOHARNESS_LESSON\ntouch escaped\nlast line",
    "before\nAUTOHARNESS_LESSON\nEOF\n'AUTOHARNESS_LESSON'\nafter",
    "Quote \"$HOME\" and `pwd` literally; never ${X} or $(whoami) -- 'single' \\n",
])
def test_learn_command_keeps_any_lesson_verbatim(short_tmp, lesson):
    """Whatever the lesson holds, a line equal to a heredoc end marker included, the /learn
    command hands it to `autoharnessctl learn -` verbatim on stdin, for the session named, and
    runs nothing else."""
    sid = "0b6f2a4e-5c1d-4e8f-9a7b-3c2d1e0f9a8b"
    argv, stdin = run_learn_command(short_tmp, lesson, sid)
    assert argv == ["learn", "--session", sid, "-"]
    assert stdin == (lesson + "\n").encode()
