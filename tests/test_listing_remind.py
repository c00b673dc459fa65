"""The prompt reminder's matching (daemon/listing/remind.py), on plain values: a prompt
matches a skill by the words of its name and its description's first clause, deterministically,
each skill once, within a size bound."""

from claude_autoharness.daemon.listing.remind import first_clause, matches, reminder, trigger

MIGRATE = trigger("migrate-first", "project",
                  "Use when running the database migrations: run them on a copy first.")
LOGS = trigger("check-server-logs", "user", "Before debugging a failing request, read the server log.")


def names(found):
    return [t.name for t in found]


def test_first_clause_is_the_trigger():
    assert first_clause("Use when X happens: do Y. More.") == "Use when X happens"
    assert first_clause("No clause end") == "No clause end"


def test_a_prompt_naming_the_situation_matches():
    assert names(matches("please run the migrations on the staging database", [MIGRATE, LOGS])) \
        == ["migrate-first"]
    assert names(matches("the request is failing, can you debug it?", [MIGRATE, LOGS])) \
        == ["check-server-logs"]


def test_one_shared_word_or_nothing_does_not_match():
    assert matches("hello there", [MIGRATE, LOGS]) == []
    assert matches("what is a database anyway", [MIGRATE, LOGS]) == []


def test_done_skills_are_not_named_again():
    assert matches("run the database migrations", [MIGRATE], frozenset({"project/migrate-first"})) == []


def test_reminder_names_the_skill_and_how_to_load_it_within_the_bound():
    text, used = reminder([MIGRATE, LOGS], 600)
    assert "`migrate-first`" in text and 'skill: "migrate-first"' in text and len(text) <= 600
    assert names(used) == ["migrate-first", "check-server-logs"]
    short, used = reminder([MIGRATE, LOGS], 250)
    assert len(short) <= 250 and names(used) == ["migrate-first"]
    assert reminder([MIGRATE], 40) == ("", [])


def test_same_input_same_output_best_first():
    many = [trigger(f"deploy-step-{i}", "project", f"Use when deploying the service step {i}")
            for i in range(10)]
    a = matches("deploying the service now, step 3", many)
    assert a == matches("deploying the service now, step 3", many) and len(a) == 3
