"""Verdicts belong to the version of the skill they judged, and a user can see all of them,
end to end through the real daemon, the real SDK and the fake Messages API: an `update` starts
a new count (the window before it judged the old text), `skills show` works for an archived
skill and prints every verdict with its quote, `skills list` says its counts in words, `status`
totals keep archived skills and leave hand-written ones out, and a valid verdict after an
invalid one on the same skill is not refused as `repeated`."""

import json

from evidence_support import (
    MIGRATE,
    NULLS,
    Work,
    hand_written,
    reply,
    seed,
    skills,
    status,
    verdict,
)
from harness import Daemon, ctl, wait_for

FIXED = "Run `scripts/migrate.sh --dry-run` first; run it for real only on a scratch database."


def shown(project, name):
    r = ctl("skills", "show", name, "--project", str(project), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_an_update_starts_a_new_count(home, project, api):
    """One window loads `migrate-first` and the user corrects it: the model says `harmful`
    and proposes an `update` fixing the text; the update lands first, yet the verdict judged
    the text before it (v1). The next window's `harmful` is on the new text (v2): one harmful
    verdict on the current version, so the skill stays live; both are in `skills show`."""
    seed(project, "migrate-first", *MIGRATE)
    w = Work(home, project)
    broke = "no, the migration script broke the dev database again"
    w.load("migrate-first")
    w.say("user", broke)
    update = dict(NULLS, action="update", skill="migrate-first", layer="project",
                  reason="the user corrected it", evidence=broke, description=MIGRATE[0],
                  body=FIXED)
    api.push(reply(verdict("migrate-first", "harmful", broke), proposals=[update]))
    d = Daemon(home["home"])
    try:
        w.window_done(1)
        md = project / ".claude/skills/migrate-first/SKILL.md"
        wait_for(lambda: "--dry-run" in md.read_text(), what="the update landed")
        w.load("migrate-first")
        w.say("user", "the dry run still touched the dev database")
        api.push(reply(verdict("migrate-first", "harmful", "the dry run still touched")))
        w.window_done(2)
        assert wait_for(lambda: shown(project, "migrate-first")["verdicts"][1:], timeout=60,
                        what="both verdicts")
        got = [(v["quote"], v["version"], v["current"])
               for v in shown(project, "migrate-first")["verdicts"]]
        assert got == [(broke, 1, False), ("the dry run still touched", 2, True)]
        listed = skills(project)
        assert ("migrate-first", "live") in listed
        assert listed[("migrate-first", "live")]["feedback"]["harmful"] == 1
    finally:
        d.stop()


def test_what_it_knows_is_visible(home, project, api):
    """Two windows with a grounded `harmful` on `migrate-first` archive it. Each reply starts
    with an invalid verdict on it (unattributable; `missed` though loaded): the valid one after
    it is accepted, not refused as `repeated`.
    `skills show` of the archived skill prints its row, its verdicts with their quotes; the
    list says `verdicts: 2 harmful`; `status` keeps the archived skill's verdicts and leaves
    out the hand-written skill's; `queue feedback` prints each quote."""
    seed(project, "migrate-first", *MIGRATE)
    mine = hand_written(project, "by-hand", "Format with the house style.")
    w = Work(home, project)
    d = Daemon(home["home"])
    try:
        for i in (1, 2):
            w.load("migrate-first")
            w.read(mine)
            w.say("user", f"no, the migration script broke the dev database again ({i})")
            quote = f"the migration script broke the dev database again ({i})"
            # an invalid verdict first: at intake (no such quote), then at grounding (a
            # `missed` on a skill the window loads)
            first = [verdict("migrate-first", "harmful", "a quote from nowhere") if i == 1
                     else verdict("migrate-first", "missed", quote)]
            api.push(reply(*first, verdict("migrate-first", "harmful", quote),
                           verdict("by-hand", "helped", quote)))
            w.window_done(i)
        codes = [(v["verdict"]["skill"], v["status"], [f["code"] for f in v["findings"]])
                 for v in json.loads(ctl("queue", "feedback", "--json").stdout)]
        mine = [c for c in codes if c[0] == "migrate-first"]
        assert mine == [("migrate-first", "rejected", ["unattributable"]),
                        ("migrate-first", "accepted", []),
                        ("migrate-first", "rejected", ["loaded"]),
                        ("migrate-first", "accepted", [])]
        wait_for(lambda: ("migrate-first", "archived") in skills(project), timeout=60,
                 what="harmful archive")
        r = ctl("skills", "show", "migrate-first", "--project", str(project))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "archived (harmful)" in r.stdout and "verdicts: 2 harmful" in r.stdout
        assert ('harmful (v1) ' in r.stdout
                and '"the migration script broke the dev database again (2)"' in r.stdout)
        assert shown(project, "migrate-first")["info"]["status"] == "archived"
        text = ctl("skills", "list", "--project", str(project)).stdout
        row = next(line for line in text.splitlines() if line.startswith("migrate-first"))
        assert "verdicts: 2 harmful" in row and "/" not in row.split("archived")[1]
        lib = wait_for(lambda: (lambda x: x if x["feedback"]["harmful"] == 2 else None)(
            status()["library"]), timeout=60, what="status totals")
        assert lib["feedback"]["helped"] == 0  # the hand-written skill's are not judged
        assert "harmful, 0 missed" in ctl("status").stdout
        feedback = ctl("queue", "feedback").stdout
        assert 'quote: "the migration script broke the dev database again (1)"' in feedback
    finally:
        d.stop()


def test_the_memory_guard_catches_paraphrases_and_rules_restated_in_a_body(home, project,
                                                                             api):
    """CLAUDE.md keeps "Always run `make lint` before committing." A `create` paraphrasing it
    ("about to commit Python code: lint it with make lint beforehand": word overlap 0.38) and
    one restating it in its body under another description are refused as duplicates naming
    CLAUDE.md; a skill on the same topic saying something else lands."""
    (project / "CLAUDE.md").write_text("# House rules\n\n- Always run `make lint` before "
                                       "committing.\n")
    w = Work(home, project)
    w.say("user", "lint failed in CI again; when the linter crashes, clear its cache")
    base = dict(NULLS, action="create", layer="project", reason="CI rejected the code",
                evidence="lint failed in CI again")
    paraphrase = dict(base, skill="lint-python",
                      description="Use when about to commit Python code: lint it with make "
                                  "lint beforehand.", body="Run `make lint`, fix what it says.")
    in_body = dict(base, skill="finish-change",
                   description="Use when finishing a change in the repository.",
                   body="Before you commit, always run make lint; CI rejects the rest.")
    other = dict(base, skill="linter-cache",
                 description="Use when the linter itself crashes: clear its cache directory "
                             "and retry.", body="Delete `.ruff_cache/` and run it again.")
    api.push(reply(proposals=[paraphrase, in_body, other]))
    d = Daemon(home["home"])
    try:
        w.window_done(1)

        def judged():
            got = json.loads(ctl("queue", "list", "--json").stdout)
            return got if got and all(i["status"] != "queued" for i in got) else None

        got = {i["proposal"]["skill"]: i for i in wait_for(judged, timeout=60, what="promoted")}
        for name in ("lint-python", "finish-change"):
            assert got[name]["status"] == "rejected", got[name]
            [f] = got[name]["findings"]
            assert f["code"] == "duplicate" and "CLAUDE.md (project)" in f["message"]
        assert got["linter-cache"]["status"] == "landed", got["linter-cache"]["findings"]
    finally:
        d.stop()
