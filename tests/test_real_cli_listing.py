"""The skill listing autoharness predicts, held against what the real Claude Code CLI sends.

Each test sets up a user (tests/real_cli.py) with skills of both layers — hand-written ones and
ones autoharness landed — runs one `claude -p` turn against the loopback fake of the Messages
API, and compares `autoharnessctl skills listing --json` with the listing in the request the
fake received, entry for entry: the same entries, the same ones listed by name only, the same
description lengths after Claude Code's cut.
"""

import json
import subprocess
import time

from listing_support import hand_written, words
from promote_support import BODY, seed
from real_cli import strings

MODEL_200K = ("--model", "claude-sonnet-4-5")  # a 200k-token context: an 8,000-character budget
HEAD = "The following skills are available for use with the Skill tool:\n\n"


def learned(monkeypatch, box, name: str, layer: str, n: int) -> None:
    """A skill autoharness landed (its promoter, on the box's dirs)."""
    monkeypatch.setenv("AUTOHARNESS_HOME", str(box.ah))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(box.claude))
    seed(box.project, name, words(name, n), BODY, layer=layer)


def used(box, uses: dict[str, tuple[int, float]]) -> None:
    """Claude Code's own usage record: name -> (usageCount, days since last use)."""
    path = box.claude / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    now = time.time() * 1000
    data["skillUsage"] = {k: {"usageCount": c, "lastUsedAt": now - d * 86_400_000}
                          for k, (c, d) in uses.items()}
    path.write_text(json.dumps(data))


def sent_listing(model) -> dict[str, str | None]:
    """name -> the description as listed (None: by name only), from the first session request."""
    req = model.session_requests()[0]
    [text] = [t for t in strings(req.get("messages")) if HEAD in t][:1]
    body = text.split(HEAD, 1)[1].split("\n</system-reminder>", 1)[0]
    out: dict[str, str | None] = {}
    last = None
    for line in body.split("\n"):
        if line.startswith("- "):
            name, sep, desc = line[2:].partition(": ")
            last = name
            out[name] = desc if sep else None
        elif last is not None and out[last] is not None:  # a description's own line break
            out[last] += "\n" + line
    return out


def predicted(box) -> dict:
    r = box.ctl("skills", "listing", "--project", str(box.project), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check(box, model, *args: str) -> dict:
    """Run one turn, then hold the prediction against the request, entry for entry."""
    want = predicted(box)
    box.run("hello listing", *args)
    got = sent_listing(model)
    assert [ln["name"] for ln in want["lines"]] == list(got)
    for ln in want["lines"]:
        assert ln["full"] == (got[ln["name"]] is not None), ln["name"]
        if ln["full"] and ln["layer"] != "bundled":
            assert ln["desc_chars"] == len(got[ln["name"]]), ln["name"]
    return want


def test_under_budget_every_skill_is_listed_whole(sandbox, model, monkeypatch):
    """A few short skills fit in the 8,000-character budget of a 200k context: the prediction
    lists each with its description, as the CLI does, and says nothing is shown by name only."""
    box = sandbox()
    hand_written(box.claude / "skills", "deploy-notes", words("deploy-notes", 120))
    learned(monkeypatch, box, "check-logs-first", "project", 150)
    learned(monkeypatch, box, "quote-paths", "user", 100)
    want = check(box, model, *MODEL_200K)
    assert want["budget"] == 8000 and want["chars"] <= 8000
    assert want["autoharness_name_only"] == [] and want["fix"] == ""


def test_over_budget_unused_learned_skills_lose_their_descriptions(sandbox, model, monkeypatch):
    """Over budget, Claude Code keeps the descriptions of the skills used most (its own
    `skillUsage`, decayed by age) and lists never-used ones by name only once the budget is
    spent: the prediction names the same ones, and says which learned skills lost theirs."""
    box = sandbox()
    for i in range(6):
        hand_written(box.claude / "skills", f"user-own-{i}", words(f"user-own-{i}", 300))
        hand_written(box.project / ".claude" / "skills", f"proj-own-{i}", words(f"proj-own-{i}", 300))
    for i in range(4):
        learned(monkeypatch, box, f"learned-{i}", "project", 200)
    used(box, {"proj-own-5": (3, 1.0), "learned-2": (1, 20.0), "user-own-4": (2, 60.0)})
    want = check(box, model, *MODEL_200K)
    assert want["chars"] > want["budget"] == 8000
    full = {ln["name"] for ln in want["lines"] if ln["full"]}
    assert {"proj-own-5", "learned-2", "user-own-4"} <= full
    hidden = want["autoharness_name_only"]
    assert hidden and "learned-2" not in hidden
    assert f"{len(hidden)} learned skill" in want["text"] and "never used" in want["text"]
    assert "skillListingBudgetFraction" in want["fix"]


def test_budget_variable_and_description_cut(sandbox, model, monkeypatch):
    """SLASH_COMMAND_TOOL_CHAR_BUDGET (here from Claude Code's settings `env`) replaces the
    computed budget, a `name-only` override holds whatever the budget, and a description past
    1,536 characters is cut: the prediction follows all three as the CLI does."""
    box = sandbox()
    settings = box.claude / "settings.json"
    data = json.loads(settings.read_text())
    data.setdefault("env", {})["SLASH_COMMAND_TOOL_CHAR_BUDGET"] = "12000"
    data["skillOverrides"] = {"quiet-one": "name-only"}
    settings.write_text(json.dumps(data))
    hand_written(box.claude / "skills", "very-long", words("very-long", 1700))
    hand_written(box.claude / "skills", "quiet-one", words("quiet-one", 100))
    for i in range(8):
        hand_written(box.project / ".claude" / "skills", f"mid-{i}", words(f"mid-{i}", 500))
    learned(monkeypatch, box, "fresh-lesson", "project", 200)
    used(box, {"very-long": (5, 0.0)})
    want = check(box, model, *MODEL_200K)
    assert want["budget"] == 12000
    lines = {ln["name"]: ln for ln in want["lines"]}
    assert lines["quiet-one"]["full"] is False
    assert lines["very-long"]["full"] and lines["very-long"]["desc_chars"] == 1536
    assert want["chars"] > want["budget"]


REMINDER = "autoharness: a skill this project learned applies to this prompt."


def requests_with(model, text: str) -> list[dict]:
    return [b for b in model.session_requests()
            if text in "\n".join(strings(b.get("messages")))]


def test_prompt_matching_a_learned_skill_gets_the_reminder_once(sandbox, model, monkeypatch):
    """A prompt that matches a live learned skill's trigger reaches the model with the
    reminder naming it; the session's next matching prompt does not repeat it; a session whose
    prompt matches nothing gets none."""
    box = sandbox()
    learned_as(monkeypatch, box, "migrate-first",
               "Use when running the database migrations: run them on a copy first.")
    box.run("please run the migrations on the staging database")
    [first] = requests_with(model, "please run the migrations on the staging")[:1]
    text = "\n".join(strings(first.get("messages")))
    assert text.count(REMINDER) == 1 and "`migrate-first`" in text
    box.run("now run the database migrations on production", "--continue")
    [again] = requests_with(model, "now run the database migrations on production")[:1]
    assert "\n".join(strings(again.get("messages"))).count(REMINDER) == 1  # the first one only
    box.run("write a haiku about autumn")
    [other] = requests_with(model, "write a haiku about autumn")[:1]
    assert REMINDER not in "\n".join(strings(other.get("messages")))


def learned_as(monkeypatch, box, name: str, description: str) -> None:
    monkeypatch.setenv("AUTOHARNESS_HOME", str(box.ah))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(box.claude))
    seed(box.project, name, description, BODY)


def plugin(root, name: str, skills: dict[str, str], commands: dict[str, str]) -> None:
    """A plugin dir: its manifest, `skills/DIR/SKILL.md` and `commands/REL.md` files."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": name,
                                                                      "version": "1.0.0"}))
    for rel, text in {**{f"skills/{d}/SKILL.md": t for d, t in skills.items()},
                      **{f"commands/{c}.md": t for c, t in commands.items()}}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_enabled_plugins_skills_and_commands_are_predicted(sandbox, model, monkeypatch):
    """Plugins installed by the CLI itself (a local marketplace; one for the user, one for
    this project, one enabled then turned off by the project's settings, one installed but
    never enabled) list their commands, then their skills, as `plugin:NAME`, after the user's
    and the project's own, only with a description of their own, cut like any other and
    ranked in the same budget: the prediction names the same entries, with the same ones by
    name only, and still counts only autoharness's skills as learned. A skill whose
    frontmatter `name` differs from its directory is listed as `dir (name)`."""
    box = sandbox()
    market = box.root / "market"
    fm = "---\ndescription: {}\n---\nDo it.\n"
    plugin(market / "tools", "tools", {
        "lint-first": fm.format(words("tools-lint", 400)),
        "renamed-dir": "---\nname: fmt-code\ndescription: Format the code.\nwhen_to_use: "
                       "before a commit\n---\nDo it.\n",
        "quiet": "---\ndescription: Never listed.\ndisable-model-invocation: true\n---\nx\n",
        "no-description": "---\nname: no-description\n---\nNot listed without one.\n",
        "long": fm.format(words("tools-long", 1700))},
        {"release": fm.format(words("tools-release", 300)), "ops/rollback": fm.format("Roll back."),
         "plain": "A plugin command without a description is not listed.\n"})
    plugin(market / "team", "team", {"review-notes": fm.format(words("team-review", 600))},
           {"standup": fm.format("Write the standup notes.")})
    for off in ("muted", "unused"):
        plugin(market / off, off, {"gone": fm.format(f"{off} is never listed.")}, {})
    (market / ".claude-plugin").mkdir()
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps({
        "name": "local", "owner": {"name": "test"},
        "plugins": [{"name": n, "source": f"./{n}", "description": n}
                    for n in ("tools", "team", "muted", "unused")]}))
    claude = [("plugin", "marketplace", "add", str(market)), ("plugin", "install", "tools@local"),
              ("plugin", "install", "muted@local"), ("plugin", "install", "unused@local"),
              ("plugin", "install", "team@local", "--scope", "project")]
    for args in claude:
        r = subprocess.run([box.cli, *args], cwd=box.project, env=box.env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    settings = box.claude / "settings.json"
    data = json.loads(settings.read_text())
    data["enabledPlugins"].pop("unused@local")
    settings.write_text(json.dumps(data))
    local = box.project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"enabledPlugins": {"muted@local": False}}))
    hand_written(box.claude / "skills", "user-own", words("user-own", 300))
    renamed = box.claude / "skills" / "own-dir"  # its frontmatter names it otherwise
    renamed.mkdir()
    (renamed / "SKILL.md").write_text("---\nname: own-name\ndescription: Mine.\n---\nx\n")
    (box.project / ".claude" / "commands").mkdir(parents=True)
    (box.project / ".claude" / "commands" / "ship.md").write_text(fm.format("Ship it."))
    for i in range(3):
        learned(monkeypatch, box, f"learned-{i}", "project", 240)
    used(box, {"tools:long": (9, 0.0)})  # ranked by its `plugin:NAME`
    want = check(box, model, *MODEL_200K)
    names = [ln["name"] for ln in want["lines"]]
    ours = [n for n in names if n.startswith(("tools:", "team:"))]
    assert ours == ["tools:ops:rollback", "tools:release", "team:standup", "tools:lint-first",
                    "tools:long", "tools:renamed-dir (tools:fmt-code)", "team:review-notes"]
    assert names.index("ship") < names.index("tools:ops:rollback")
    assert "own-dir (own-name)" in names
    assert not any(n.startswith(("muted:", "unused:")) for n in names)
    lines = {ln["name"]: ln for ln in want["lines"]}
    assert lines["tools:long"]["full"] and lines["tools:long"]["desc_chars"] == 1536
    assert {lines[n]["layer"] for n in ours} == {"plugin"}
    assert want["chars"] > want["budget"] == 8000
    assert want["autoharness"] == 3  # the plugins' skills are not counted as learned
    assert want["autoharness_name_only"] == ["learned-0", "learned-1", "learned-2"]
    assert "3 learned skills never used are shown by name only" in want["text"]
