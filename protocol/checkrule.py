"""A check's rule, in Claude Code's permission-rule syntax: parsed and held against a tool call.

`Bash(pytest *)`, `Bash(git push --force*)`, `Edit(src/generated/**)`, `Write(**/*.lock)`:
the tool, and in parentheses what of its input the rule is about. The promoter parses a
proposal's rule with this module, the check hook matches calls with it, and the adherence
counts use it, so the three can never disagree.

As Claude Code reads such rules:
- Bash: `*` matches any run of characters; `cmd *` also matches `cmd` alone (a word boundary,
  so `ls *` is not `lsof`); the older `cmd:*` is the same prefix form; no `*` is an exact
  match. A compound command (`&&`, `||`, `;`, `|`, `&`, a newline) matches when one of its
  commands does, each with its leading `VAR=value` words dropped.
- File tools (`Edit` covers every tool that edits a file, `Write` only Write, `Read` only
  Read): gitignore-style globs. `//x` is the absolute path `/x`, `~/x` under the home
  directory, and `/x`, `./x`, `x` are relative to the check's base (its project's root, or
  the session's directory for a user-level check); a glob without a `/` matches a name at any
  depth; `**` matches any number of directories.

Pure and stdlib-free (builtins only): the check hook imports it on a tool call. `match` says
None for a call it cannot read (a command with unbalanced quotes, `$(...)`, backquotes or a
here-document): nothing is decided about a call that is not understood.
"""

BASH = "Bash"
EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
# rule tool -> the tools whose calls it is held against
TOOLS = {"Bash": ("Bash",), "Edit": EDIT_TOOLS, "Write": ("Write",), "Read": ("Read",)}
MAX_RULE = 200
_OPERATORS = ("&&", "||", ";", "|", "&", "\n")
# Probes a rule must not all match: a rule matching every one of them matches every call.
_BASH_PROBES = ("ls", "echo hello", "true", "git status", "cd sub && make -j2", "x")
_PATH_PROBES = ("a.txt", "src/main.py", "docs/deep/er/notes.md", ".env", "Makefile")


class Rule:
    """A parsed rule: `tool` (Bash, Edit, Write, Read) and its `spec` (None: every call)."""

    __slots__ = ("tool", "spec")

    def __init__(self, tool: str, spec: str | None):
        self.tool = tool
        self.spec = spec

    def __repr__(self) -> str:
        return self.text()

    def __eq__(self, other) -> bool:
        return isinstance(other, Rule) and (self.tool, self.spec) == (other.tool, other.spec)

    def __hash__(self) -> int:
        return hash((self.tool, self.spec))

    def text(self) -> str:
        return self.tool if self.spec is None else f"{self.tool}({self.spec})"

    def tools(self) -> tuple[str, ...]:
        """The tool names whose calls this rule is held against."""
        return TOOLS[self.tool]


def parse(text: str) -> tuple[Rule | None, str]:
    """The rule, or None and what is wrong with it in words that say how to write it."""
    rule, why = syntax(text)
    if rule is not None and matches_every_call(rule):
        tool = rule.tool
        return None, (f"`{text.strip()}` matches every {tool} call: name the command or path "
                      f"the lesson is about, e.g. "
                      f"`{tool}({'pytest *' if tool == BASH else 'src/generated/**'})`")
    return rule, why


def syntax(text: str) -> tuple[Rule | None, str]:
    """`parse` without the test for a rule that holds every call (the check hook makes that
    test only for a rule a call broke)."""
    if not isinstance(text, str) or not text.strip():
        return None, "a rule is required, e.g. `Bash(pytest *)` or `Edit(src/generated/**)`"
    text = text.strip()
    if len(text) > MAX_RULE:
        return None, f"a rule is at most {MAX_RULE} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return None, "a rule must not contain control characters"
    tool, spec = text, None
    if "(" in text:
        if not text.endswith(")"):
            return None, f"`{text}` must end with `)`: write `Tool(pattern)`"
        tool, spec = text[: text.index("(")], text[text.index("(") + 1: -1]
    if tool not in TOOLS:
        return None, (f"the tool of `{text}` must be one of {', '.join(TOOLS)} "
                      f"(as Claude Code names it)")
    if spec is not None and not spec.strip():
        spec = None
    if spec is not None and ("(" in spec or ")" in spec) and tool != BASH:
        return None, f"`{text}`: a path pattern has no parentheses"
    return Rule(tool, spec), ""


def matches_every_call(rule: Rule) -> bool:
    """Whether the rule would hold every call of its tool (a bare tool, `*`, `**`, ...)."""
    if rule.spec is None:
        return True
    if rule.tool == BASH:
        return all(bash_matches(rule.spec, c) for c in _BASH_PROBES)
    base = "/p"
    return all(path_matches(rule.spec, base + "/" + p, base, "/h") for p in _PATH_PROBES)


def match(rule: Rule, tool_name: str, tool_input, base: str | None, home: str | None) -> bool | None:
    """Whether this call (tool name and decoded input) is one the rule is about; None when
    the call cannot be read (then nothing may be decided about it)."""
    if tool_name not in rule.tools() or not isinstance(tool_input, dict):
        return False
    if rule.spec is None:
        return True
    if rule.tool == BASH:
        cmd = tool_input.get("command")
        if not isinstance(cmd, str):
            return None
        parts = commands(cmd)
        if parts is None:
            return None
        return any(bash_matches(rule.spec, c) for c in parts)
    path = tool_input.get("notebook_path" if tool_name == "NotebookEdit" else "file_path")
    if not isinstance(path, str) or not path:
        return None
    if path.startswith("~/") and home:  # a window's paths may name the home directory as ~
        path = home + path[1:]
    elif not path.startswith("/") and base:
        path = base + "/" + path
    return path_matches(rule.spec, path, base, home)


def call_text(tool_name: str, tool_input) -> str | None:
    """What of a call a rule reads: the command, or the file path (None when it has none)."""
    if not isinstance(tool_input, dict):
        return None
    key = "command" if tool_name == BASH else (
        "notebook_path" if tool_name == "NotebookEdit" else "file_path")
    v = tool_input.get(key)
    return v if isinstance(v, str) else None


# -- Bash ------------------------------------------------------------------------------------

def commands(cmd: str) -> list[str] | None:
    """The simple commands of a shell command line, each without its leading `VAR=value`
    words and with its words joined by one space; None when it cannot be read safely."""
    if "`" in cmd or "$(" in cmd or "<<" in cmd:
        return None
    out: list[str] = []
    words: list[str] = []
    word = ""
    quote = ""
    i, n = 0, len(cmd)
    while i < n:
        c = cmd[i]
        if quote:
            word += c
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"' and i + 1 < n:
                word += cmd[i + 1]
                i += 1
        elif c in "'\"":
            quote = c
            word += c
        elif c == "\\" and i + 1 < n:
            if cmd[i + 1] != "\n":  # a line continuation joins the lines
                word += c + cmd[i + 1]
            i += 1
        elif c in " \t":
            if word:
                words.append(word)
                word = ""
        elif cmd.startswith(_OPERATORS, i) or c in "()":
            op = next((o for o in _OPERATORS if cmd.startswith(o, i)), c)
            if word:
                words.append(word)
                word = ""
            _end(words, out)
            words = []
            i += len(op)
            continue
        else:
            word += c
        i += 1
    if quote:
        return None
    if word:
        words.append(word)
    _end(words, out)
    return out


def _end(words: list[str], out: list[str]) -> None:
    while words and _is_assignment(words[0]):
        words = words[1:]
    if words:
        out.append(" ".join(words))


def _is_assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and bool(name) and (name[0].isalpha() or name[0] == "_") and all(
        ch.isalnum() or ch == "_" for ch in name)


def bash_matches(spec: str, command: str) -> bool:
    """One simple command against a Bash rule's pattern."""
    spec = " ".join(spec.split())
    if spec.endswith(":*"):  # the older prefix form
        spec = (spec[:-2].rstrip() + " *").lstrip()
    if "*" not in spec:
        return command == spec
    if spec.endswith(" *") and command == spec[:-2]:
        return True
    return wildcard(spec, command)


def wildcard(pattern: str, text: str) -> bool:
    """`*` matches any run of characters (separators included); everything else is literal."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == text
    if not text.startswith(parts[0]):
        return False
    pos = len(parts[0])
    for part in parts[1:-1]:
        i = text.find(part, pos)
        if i < 0:
            return False
        pos = i + len(part)
    last = parts[-1]
    return len(text) - pos >= len(last) and text.endswith(last)


# -- file paths ------------------------------------------------------------------------------

def path_matches(spec: str, path: str, base: str | None, home: str | None) -> bool:
    """A file path (absolute, as Claude Code passes it) against a path rule's glob."""
    spec = spec.strip()
    anchored = True
    if spec.startswith("//"):
        anchor, glob = "/", spec[2:]
    elif spec.startswith("~/"):
        if not home:
            return False
        anchor, glob = home, spec[2:]
    else:
        if not base:
            return False
        anchor, glob = base, spec[2:] if spec.startswith("./") else spec.lstrip("/")
        anchored = spec.startswith(("/", "./")) or "/" in glob.rstrip("/")
    rel = _relative(_normal(path), _normal(anchor))
    if rel is None:
        return False
    pattern = [p for p in glob.split("/") if p]
    if not pattern:
        return False
    if not anchored:
        pattern = ["**"] + pattern  # gitignore: a name without a slash matches at any depth
    if glob.endswith("/"):
        pattern.append("**")  # a directory: everything below it
    return _segments(pattern, rel.split("/"))


def _normal(path: str) -> str:
    parts: list[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if parts:
                parts.pop()
            continue
        parts.append(p)
    return "/" + "/".join(parts)


def _relative(path: str, anchor: str) -> str | None:
    if anchor == "/":
        return path[1:] or None
    if path.startswith(anchor + "/"):
        return path[len(anchor) + 1:]
    return None


def _segments(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        rest = pattern[1:]
        if not rest:
            return True
        return any(_segments(rest, parts[i:]) for i in range(len(parts)))
    if not parts:
        return False
    return wildcard(head, parts[0]) and _segments(pattern[1:], parts[1:])
