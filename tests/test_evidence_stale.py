"""Stale means a path the skill says exists, in the project, does not — end to end through the
real daemon: an ignored build output that exists, a host-style name, a file the skill says to
create and a file inside a git submodule are not missing; a file that really is gone is, and
only it archives the skill after `stale_after_turns`."""

import subprocess

from evidence_support import Work, git, seed, skills, status
from harness import Daemon, hook, wait_for

BODY = """Before a release:

1. Check the bundle `dist/bundle.js` is fresh (`make dist` rebuilds it).
2. Pin the tool from `github.com/acme/tool.git` at the release tag.
3. Create `docs/adr/0001-title.md` for the decision, from the template.
4. Bump the version in `vendor/lib/src/version.c` (the vendored library).
5. Run `scripts/release.sh`.
"""


def test_only_paths_really_gone_make_a_skill_stale(home, project, monkeypatch):
    """The skill names five paths: an ignored `dist/bundle.js` that exists, a host-style
    `github.com/acme/tool.git`, `docs/adr/0001-title.md` it says to create, a file inside the
    `vendor/lib` submodule, and `scripts/release.sh`. Only the last, once deleted, is stale;
    after `stale_after_turns` turns the skill is archived `stale` for it alone."""
    monkeypatch.setenv("AUTOHARNESS_LIBRARY_STALE_AFTER_TURNS", "2")
    sub = home["tmp"] / "libsrc"
    (sub / "src").mkdir(parents=True)
    (sub / "src/version.c").write_text("int v = 1;\n")
    git(sub, "init", "-q")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "lib")
    (project / "scripts/release.sh").write_text("#!/bin/sh\n")
    (project / ".gitignore").write_text("dist/\n")
    (project / "dist").mkdir()
    (project / "dist/bundle.js").write_text("bundle\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "init")
    subprocess.run(["git", "-C", str(project), "-c", "protocol.file.allow=always", "submodule",
                    "add", "-q", str(sub), "vendor/lib"], check=True, capture_output=True)
    git(project, "commit", "-qm", "the vendored library")
    seed(project, "release-steps", "Use when cutting a release: the release checklist.", BODY)
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        def stop():
            assert hook(w.ev("Stop")).returncode == 0

        stop()
        wait_for(lambda: ("release-steps", "live") in skills(project), what="listed")
        # a pass ran: the mark would be there by now (the Stop's pass judges the project)
        wait_for(lambda: status_turns() >= 1, what="the turn counted")
        assert skills(project)[("release-steps", "live")]["stale"] == []
        git(project, "rm", "-q", "scripts/release.sh")
        stop()
        wait_for(lambda: skills(project)[("release-steps", "live")]["stale"], timeout=90,
                 what="stale")
        assert skills(project)[("release-steps", "live")]["stale"] == ["scripts/release.sh"]
        for _ in range(3):
            stop()
        wait_for(lambda: ("release-steps", "archived") in skills(project), timeout=90,
                 what="stale archive")
        assert skills(project)[("release-steps", "archived")]["reason"] == "stale"
    finally:
        d.stop()


def status_turns():
    return status()["library"]["turns"]["user"]
