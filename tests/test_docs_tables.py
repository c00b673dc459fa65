"""The docs render and say what a stranger needs: every Markdown table row has its header's
number of cells, the config reference gives each number's range, the off-switch docs cover
every switch, the quick start says how to get pipx or uv, and the README says what the tests
need and how long they take."""

import re

from claude_autoharness.protocol import config
from conftest import REPO

DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def cells(row: str) -> int:
    """The cells of a table row as GitHub counts them: split on every unescaped `|` (inside
    code spans too), the outer pipes not counted."""
    body = row.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return len(re.split(r"(?<!\\)\|", body))


def tables(text: str):
    """(line number, header cells, [(line number, row)]) of each table outside code blocks."""
    lines, in_code, i = text.splitlines(), False, 0
    while i < len(lines):
        if lines[i].startswith("```"):
            in_code = not in_code
        elif (not in_code and lines[i].lstrip().startswith("|") and i + 1 < len(lines)
              and re.fullmatch(r"\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*", lines[i + 1])):
            rows, j = [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append((j + 1, lines[j]))
                j += 1
            yield i + 1, cells(lines[i]), rows
            i = j
            continue
        i += 1


def test_every_table_row_has_the_headers_cell_count():
    bad = []
    for doc in DOCS:
        for at, want, rows in tables(doc.read_text()):
            bad += [f"{doc.name}:{n}: {cells(row)} cells, the header at line {at} has {want}"
                    for n, row in rows if cells(row) != want]
    assert not bad, "\n".join(bad)


def test_the_cell_counter_sees_a_stray_pipe():
    assert cells("| a | b | c |") == 3 and cells("| a | `x \\| y` | c |") == 3
    assert cells("| a | b: | c | d |") == 4


def test_config_reference_gives_every_numbers_range():
    text = (REPO / "docs" / "configuration.md").read_text()
    missing = []
    for key, (lo, hi) in config.RANGES.items():
        first, _, last = key.rpartition(".")
        row = next((line for line in text.splitlines()
                    if line.startswith(f"| `{key}`") or (first and line.startswith(f"| `{first}.")
                                                          and f"/ `{last}`" in line.split("|")[1])),
                   None)
        if row is None or f"{config._num(lo)} to {config._num(hi)}" not in row:
            missing.append(key)
    assert not missing, missing


def test_off_switch_docs_cover_every_switch():
    section = (REPO / "docs" / "configuration.md").read_text().split("## Off switches", 1)[1]
    section = section.split("\n## ", 1)[0]
    for switch in ("AUTOHARNESS_DISABLE", ".claude/autoharness.toml", "enabled = false",
                   "autoharnessctl pause", "resume", "AUTOHARNESS_AUTOSTART", "autostart = false",
                   "autoharnessctl stop", 'enabled = "false"'):
        assert switch in section, switch
    readme = (REPO / "README.md").read_text().split("## Off switches", 1)[1].split("\n## ", 1)[0]
    assert "configuration.md#off-switches" in readme


def test_quick_start_says_how_to_get_an_installer_and_onto_path():
    """Stock Debian/Ubuntu and macOS have neither pipx nor uv: one line each to get one, the
    PATH step, and the venv path that needs neither."""
    quick = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for line in ("apt install pipx", "brew install pipx", "brew install uv",
                 "python3 -m pip install --user pipx", "python3 -m pipx ensurepath",
                 "uv tool update-shell", "needs neither pipx nor uv", "apt install python3-venv"):
        assert line in quick, line


def test_readme_says_what_the_tests_need_and_how_long_they_take():
    section = (REPO / "README.md").read_text().split("## Run the tests", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "network" in section and "npm" in section and "235 MB" in section
    assert re.search(r"\d+ to \d+ minutes", section)
    assert "CI=true" in section and "AUTOHARNESS_TEST_CLAUDE" in section
    assert "need no network" not in section


def test_ci_runs_the_readmes_test_command():
    """.ci/run runs the README's test command as written, so the figure the README gives is
    the one CI sees."""
    readme = (REPO / "README.md").read_text().split("## Run the tests", 1)[1]
    [command] = re.findall(r"^python3 -m venv .*pytest.*$", readme, re.M)
    assert command in (REPO / ".ci" / "run").read_text().splitlines()
