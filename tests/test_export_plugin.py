"""`skills export --plugin DIR`: the live autoharness-owned skills as a Claude Code plugin
that the real `claude plugin validate` accepts without a warning; and the project's own
plugin layout passes the same check."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from claude_autoharness.client import export as export_mod
from claude_autoharness.daemon.promote.land import Promoter
from claude_autoharness.protocol.config import PromoterConfig
from harness import CTL
from promote_support import intent

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = "ran /home/alice/src/app/make check and it failed before push"


@pytest.fixture
def claude(claude_cli):
    return str(claude_cli)


# What the validator says about a plugin the directory would not take as it is: problems
# (refused), warnings, and parts that reach hosts the manifest does not declare.
NOT_CLEAN = ("warning", "problem", "✘", "⚠", "_missing", "hosts not declared")
# A validator older than network declarations flags the manifest's `network` as unknown (and
# ignores it at load time); newer ones ask for it. Both must pass everything else they check.
OLD_VALIDATOR = "Unknown field 'network'"


def _run_validate(exe: str, path: Path, home: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), NO_COLOR="1",
               DISABLE_AUTOUPDATER="1")
    r = subprocess.run([exe, "plugin", "validate", "--strict", str(path)], capture_output=True,
                       text=True, env=env, timeout=120)
    return r.returncode, r.stdout + r.stderr


def _without_network(path: Path, home: Path) -> Path:
    """A copy of the plugin layout at `path` whose manifests declare no `network`."""
    root = path.parent.parent if path.is_file() else path
    copy = home / f"no-network-{len(list(home.glob('no-network-*')))}"
    for part in (".claude-plugin", "hooks", "commands", "skills", "README.md"):
        src = root / part
        if src.is_dir():
            shutil.copytree(src, copy / part)
        elif src.exists():
            copy.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, copy / part)
    manifest = copy / ".claude-plugin" / "plugin.json"
    data = json.loads(manifest.read_text())
    data.pop("network", None)
    manifest.write_text(json.dumps(data))
    return copy / path.relative_to(root) if path.is_file() else copy


def validate(exe: str, path: Path, home: Path) -> str:
    """`claude plugin validate --strict PATH` with a temp HOME; asserts it passed with no
    problem, warning, advice or undeclared network use."""
    code, out = _run_validate(exe, path, home)
    if OLD_VALIDATOR in out:
        assert out.count("Unknown field") == 1, out
        code, out = _run_validate(exe, _without_network(path, home), home)
    assert code == 0, out
    assert not [w for w in NOT_CLEAN if w in out.lower()] and "passed" in out.lower(), out
    return out


@pytest.fixture
def library(home):
    """A user-layer and a project-layer skill landed by autoharness, one archived, and one
    hand-written skill: only the first two are autoharness's live skills."""
    proj = home["tmp"] / "proj"
    (proj / ".claude" / "skills").mkdir(parents=True)
    (home["claude"] / "skills").mkdir()
    pr = Promoter(PromoterConfig())
    window = json.dumps({"type": "user", "message": {"content": EVIDENCE}}) + "\n"
    for it in (intent("create", "run-checks", evidence=EVIDENCE),
               intent("create", "user-habit", layer="user", evidence=EVIDENCE),
               intent("create", "gone-soon"), intent("archive", "gone-soon")):
        win = window if it.proposal.evidence == EVIDENCE else \
            json.dumps({"content": it.proposal.evidence}) + "\n"
        out = pr.promote(it, win, str(proj))
        assert out.status == "landed", out.findings
    hand = proj / ".claude" / "skills" / "by-hand"
    hand.mkdir()
    (hand / "SKILL.md").write_text("---\nname: by-hand\ndescription: Use when testing.\n---\n\nx\n")
    return {"proj": proj, "home": home}


def export(library, dest, *extra):
    return subprocess.run([CTL, "skills", "export", "--plugin", str(dest), "--project",
                           str(library["proj"]), *extra], capture_output=True, text=True)


def all_text(d) -> str:
    out = []
    for here, _, names in os.walk(d):
        for n in names:
            if not n.endswith(".png"):
                out.append(open(os.path.join(here, n), encoding="utf-8").read())
    return "\n".join(out)


def test_export_holds_the_live_owned_skills_without_machine_paths(library, tmp_path):
    """Both layers' live autoharness skills are in skills/, with their provenance (landings
    kept, the target path dropped); no archived or hand-written skill; no path of this machine
    (temp dirs, home directories) anywhere in the plugin."""
    dest = tmp_path / "plugin"
    r = export(library, dest)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(dest / "skills")) == ["run-checks", "user-habit"]
    prov = json.loads((dest / "skills" / "run-checks" / ".autoharness" /
                       "provenance.json").read_text())
    assert "target" not in prov and prov["landings"][0]["action"] == "create"
    text = all_text(dest)
    assert str(library["home"]["tmp"]) not in text and "/home/alice" not in text
    assert "~/src/app/make check" in text  # the evidence quote kept, its home path scrubbed
    manifest = json.loads((dest / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "autoharness-skills"
    assert not (dest / ".claude-plugin" / "marketplace.json").exists()


def test_export_passes_claude_plugin_validate(library, tmp_path, claude):
    """The real CLI validates the exported plugin, and with --marketplace the marketplace
    manifest too, both with --strict and with no problem, warning or advice: the export has a
    README naming its skills and how to install it, and the icon."""
    dest = tmp_path / "plugin"
    assert export(library, dest).returncode == 0
    said = validate(claude, dest, tmp_path)
    # what the docs quote the validator saying of an export is what it says
    for doc in ("cli.md", "install-and-plugin.md"):
        text = " ".join((REPO / "docs" / doc).read_text().split())
        claim = re.search(r'`claude plugin validate[^`]*`(?:, which)? says "([^"]+)" and "([^"]+)"',
                          text)
        assert claim, f"docs/{doc} no longer quotes what `claude plugin validate` says"
        for phrase in claim.groups():
            assert phrase in " ".join(said.split()), (doc, phrase, said)
    text = (dest / "README.md").read_text()
    assert "`run-checks`" in text and "`user-habit`" in text and len(text.split()) >= 40
    assert (dest / ".claude-plugin" / "icon.png").read_bytes() == export_mod.icon_png()
    manifest = json.loads((dest / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["license"] == "LicenseRef-Proprietary" and manifest["network"] == {"hosts": []}
    market = tmp_path / "market"
    r = export(library, market, "--marketplace", "--plugin-name", "team-skills",
               "--license", "MIT")
    assert r.returncode == 0, r.stderr
    out = validate(claude, market, tmp_path)
    assert "marketplace" in out.lower()
    validate(claude, market / ".claude-plugin" / "plugin.json", tmp_path)
    assert json.loads((market / ".claude-plugin" / "plugin.json").read_text())["license"] == "MIT"


def test_reexport_replaces_an_earlier_export_and_refuses_other_dirs(library, tmp_path):
    """A second export replaces the first (a skill archived since is gone from it); a
    non-empty directory that is not an export is refused with the fix, and left alone."""
    dest = tmp_path / "plugin"
    assert export(library, dest).returncode == 0
    pr = Promoter(PromoterConfig())
    it = intent("archive", "run-checks")
    window = json.dumps({"content": it.proposal.evidence}) + "\n"
    assert pr.promote(it, window, str(library["proj"])).status == "landed"
    assert export(library, dest).returncode == 0
    assert os.listdir(dest / "skills") == ["user-habit"]
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep\n")
    r = export(library, other)
    assert r.returncode == 1 and "not an earlier export" in r.stderr
    assert os.listdir(other) == ["notes.txt"]


def test_the_projects_own_plugin_layout_validates_without_warnings(tmp_path, claude):
    """The repository as a plugin marketplace and as a plugin passes `claude plugin validate
    --strict` with no problem, warning or advice: it has a README, a square PNG icon of a size
    the directory takes, and declares that it reaches no network host."""
    out = validate(claude, REPO, tmp_path)
    assert "advice" not in out.lower(), out  # the README has the one-step install line
    validate(claude, REPO / ".claude-plugin" / "plugin.json", tmp_path)
    manifest = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["network"] == {"hosts": []}
    assert (REPO / ".claude-plugin" / "icon.png").read_bytes() == export_mod.icon_png()


def test_the_icon_is_a_square_png_the_directory_takes():
    """The icon is a PNG, square, 512 to 2048 px a side, under 2 MB."""
    import struct

    png = export_mod.icon_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    w, h = struct.unpack(">II", png[16:24])
    assert w == h and 512 <= w <= 2048 and len(png) < 2 * 1024 * 1024
