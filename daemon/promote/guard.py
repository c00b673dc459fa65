"""The safety guard: text a skill must never carry, whoever proposed it.

A skill is loaded into a future agent's context and its scripts may be run, so a hostile or
careless proposal is an attack on every later session. The rules are deliberately broad:
a false rejection costs one lesson, a false acceptance costs the user's machine. Each rule
belongs to a family (exfiltration, injection, destructive, persistence, backdoor,
obfuscation); the redaction rules from capture add `secret` and `pii`.

Most rules are "A, later on the same line, B". Written as one regex (`A[^\\n]*B`) that costs
time quadratic in the line length on hostile input (a line of 3,000 `curl`s took seconds), so
such rules are sequences of patterns searched one after the other from the first A of each
line: linear, and equivalent for the patterns used here.
"""

import re

from ..proposals import Finding

FAMILY = "safe"

_SHELLS = (r"\|\s*(?:sudo\s+)?(?:env\s+)?"
           r"(?:(?:ba|z|k|da|c|tc|fi|a)?sh|python[0-9.]*|perl|ruby|node|php)\b")
_FETCH = r"\b(?:curl|wget|fetch|aria2c|iwr|invoke-webrequest|invoke-restmethod)\b"
_NET = (r"\b(?:curl|wget|nc|ncat|netcat|socat|scp|rsync|ftp|sftp|telnet)\b|https?://"
        r"|requests\.(?:post|put|get)|urlopen|\bfetch\(|/dev/(?:tcp|udp)/")
_SECRETISH = (
    r"\$\{?[A-Za-z_]*(?:TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)"
    r"[A-Za-z_]*\}?|\bprintenv\b|\$\(\s*env\s*\)|`env`|\benv\s*\||os\.environ|process\.env"
    r"|~?/?\.ssh/|id_rsa|id_ed25519|\.aws/credentials|\.netrc|\.git-credentials|\.npmrc"
    r"|\.pypirc|\.config/gh/hosts|\bkeychain\b|security\s+find-(?:generic|internet)-password"
)
_RC_PATH = (r"[\"']?[~$\w/{}.-]*?(?:\.bashrc|\.bash_profile|\.bash_login|\.profile|\.zshrc"
            r"|\.zshenv|\.zprofile|\.zlogin|config\.fish|\.cshrc|\.tcshrc)\b")
_DECODERS = (r"\bbase64\s+(?:-d|-D|--decode)\b|\bxxd\s+-r\b|\buudecode\b|\bgunzip\b|\bzcat\b"
             r"|\brev\b")
_GIT_PUSH = r"\bgit\s+push\b"
_FORCE = r"\s(?:--force(?:-with-lease)?|-[a-zA-Z]*f[a-zA-Z]*)\b"
_MAIN = r"[\s:+/](?:main|master)\b"

# (family, rule, unit, alternatives). A rule matches when one alternative — a sequence of
# patterns — matches in order inside one unit: "text" (the whole file, one pattern), "line",
# or "command" (a line cut at | ; &). Patterns see shell line continuations joined.
_RULES: list[tuple[str, str, str, list[tuple[str, ...]]]] = [
    # exfiltration: code fetched and run, secrets or the environment sent somewhere
    ("exfiltration", "download_piped_to_shell", "line", [(_FETCH, _SHELLS)]),
    ("exfiltration", "shell_runs_download", "text", [(
        r"(?:\b(?:ba|z|da|k)?sh|\bsource|\beval|\bpython[0-9.]*|\.)\s+(?:-c\s+)?[\"']?"
        rf"(?:<\(|\$\()\s*{_FETCH}",)]),
    ("exfiltration", "secret_sent_to_network", "line", [(_NET, _SECRETISH), (_SECRETISH, _NET)]),
    ("exfiltration", "secret_file_upload", "line",
     [(_FETCH, r"\s(?:-d|--data[\w-]*|-F|--form|-T|--upload-file)\s*[\"']?[\w=]*@")]),
    # injection: text aimed at the model rather than at the task
    ("injection", "ignore_instructions", "text", [(
        r"\b(?:ignore|disregard|forget|override|overrule)\s+(?:(?:all|any|the|of)\s+)*"
        r"(?:previous|prior|above|earlier|preceding|system|original|your|developer|safety)\s+"
        r"(?:\w+\s+)?(?:instructions?|prompts?|rules|directions|guidelines|messages?"
        r"|constraints)\b",)]),
    ("injection", "reveal_system_prompt", "text", [(
        r"\b(?:reveal|print|show|output|repeat|leak|dump|display|disclose|echo|recite)\b"
        r"[^\n.]{0,40}\b(?:system\s+prompt|system\s+message|initial\s+instructions"
        r"|hidden\s+instructions|developer\s+message)",)]),
    ("injection", "bypass_permissions", "text", [(
        r"--dangerously-skip-permissions|\bbypassPermissions\b"
        r"|\b(?:bypass|skip|disable|circumvent|evade|get\s+around|turn\s+off)\s+"
        r"(?:the\s+|all\s+|any\s+|your\s+)?"
        r"(?:permission|approval|safety|security|sandbox|guardrail|confirmation|hook)s?\b",)]),
    ("injection", "hide_from_user", "text", [(
        r"\b(?:without|never|don'?t|do\s+not)\s+(?:asking|ask|telling|tell|informing|inform"
        r"|notifying|notify|showing|show)\s+(?:the\s+|your\s+)?(?:user|human|operator)\b",)]),
    ("injection", "role_override", "text", [(
        r"\byou\s+are\s+now\s+(?:in\s+)?(?:a\s+|an\s+)?"
        r"(?:dan|jailbroken|unrestricted|developer\s+mode|god\s+mode)\b"
        r"|\bnew\s+system\s+(?:prompt|instructions)\b",)]),
    ("injection", "fake_turn_markup", "text", [(
        r"</?(?:system|system-reminder|system_prompt|assistant)>"
        r"|^[ \t]*(?:Human|Assistant)[ \t]*:",)]),
    # destructive: commands whose mistake is unrecoverable. In rm_root_or_home the flags are
    # consumed possessively and the recursive one found by lookahead: two plain `(flag)*`
    # groups around it backtrack quadratically on a long run of flags.
    ("destructive", "rm_root_or_home", "text", [(
        r"\brm\s+(?=(?:-{1,2}[\w-]+\s+)*?(?:-\w*[rR]\w*|--recursive)\s)(?:-{1,2}[\w-]+\s+)*+"
        r"[\"']?(?:/|/\*|~|~/|~/\*|\$HOME|\$\{HOME\}|\$HOME/\*?|\.\./?\.\.)[\"']?"
        r"(?=\s|$|;|&|\|)|--no-preserve-root",)]),
    ("destructive", "mkfs", "text",
     [(r"\bmkfs(?:\.\w+)?\b|\bmke2fs\b|\bwipefs\b|\bdiskutil\s+(?:erase|zero)",)]),
    ("destructive", "dd_to_device", "line",
     [(r"\bdd\b", r"\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)")]),
    ("destructive", "write_to_disk_device", "text",
     [(r">\s*/dev/(?:sd[a-z]|nvme\d|hd[a-z]|disk\d|mmcblk\d|xvd[a-z])",)]),
    ("destructive", "fork_bomb", "text", [(
        r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"
        r"|\b(\w+)\s*\(\s*\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}",)]),
    ("destructive", "force_push_main", "line", [
        (_GIT_PUSH, _FORCE, _MAIN), (_GIT_PUSH, _MAIN, _FORCE),
        (_GIT_PUSH, r"\s\+(?:main|master)\b")]),
    ("destructive", "chmod_root", "text",
     [(r"\bchmod\s+(?:-\w+\s+)*-\w*R\w*\s+\S+\s+(?:/|~|\$HOME)(?=\s|$)",)]),
    # persistence: making something run again later without the user asking
    ("persistence", "crontab", "text",
     [(r"\bcrontab\b(?!\s+-l\b)|/etc/cron\.|/var/spool/cron",)]),
    ("persistence", "shell_rc_write", "line", [
        (rf"(?:>>?|\btee\b(?:\s+-a)?)\s*{_RC_PATH}",), (r"\bsed\s+-i", _RC_PATH),
        (r"\b(?:add|append|put)\b", rf"\bto\s+(?:your\s+)?{_RC_PATH}")]),
    ("persistence", "service_enable", "text", [(
        r"\blaunchctl\s+(?:load|bootstrap|enable|submit)\b"
        r"|\bsystemctl\s+(?:--user\s+)?(?:enable|link|preset|reenable)\b"
        r"|Library/LaunchAgents|Library/LaunchDaemons|\.config/autostart|/etc/rc\.local"
        r"|/etc/init\.d/|\bupdate-rc\.d\b",)]),
    ("persistence", "ssh_authorized_keys", "text", [(r"authorized_keys",)]),
    # backdoor: raw network access to or from a shell
    ("backdoor", "dev_tcp", "text", [(r"/dev/(?:tcp|udp)/",)]),
    ("backdoor", "netcat_listen_or_exec", "command", [
        (r"\b(?:nc|ncat|netcat)\b", r"\s-[a-zA-Z]*[le][a-zA-Z]*\b"),
        (r"\bncat\b", r"--(?:exec|sh-exec|listen)\b"),
        (r"\bsocat\b", r"\b(?:exec|system|tcp-listen):")]),
    ("backdoor", "reverse_shell", "line", [
        (r"\b(?:ba)?sh\s+-i\s*[0-9]?>&|\bpty\.spawn\(|\bos\.dup2\(",),
        (r"\bmkfifo\b", r"\b(?:nc|ncat|netcat|telnet)\b"),
        (r"\bsocket\.socket\(", r"\.connect\(")]),
    # obfuscation: content the reviewer (human or model) cannot read
    ("obfuscation", "decode_piped_to_shell", "line",
     [(_DECODERS, _SHELLS), (r"\bopenssl\s+(?:base64|enc)\b", r"\s-d\b", _SHELLS)]),
    ("obfuscation", "eval_decoded", "text", [(
        r"\b(?:eval|exec|execfile)\s*\(?[^\n]{0,80}(?:b64decode|base64|atob\(|fromhex|unhexlify"
        r"|codecs\.decode|decompress|\\x[0-9a-fA-F]{2}|rot13|fromCharCode)",)]),
    # Anchored at the start of a run or line, so a near-miss run is not rescanned per char.
    ("obfuscation", "long_encoded_blob", "text", [(
        r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{256,}"
        r"|^(?:[ \t]*[A-Za-z0-9+/]{60,}={0,2}[ \t]*\n){4,}"
        r"|(?:\\x[0-9a-fA-F]{2}){48,}|(?:\\u[0-9a-fA-F]{4}){48,}",)]),
    ("obfuscation", "hidden_unicode", "text",
     [("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]",)]),
]

_FLAGS = re.IGNORECASE | re.MULTILINE
_COMPILED = [(family, rule, unit, [tuple(re.compile(p, _FLAGS) for p in seq) for seq in alts])
             for family, rule, unit, alts in _RULES]
_UNIT_END = {"line": re.compile(r"\n"), "command": re.compile(r"[\n|;&]")}
_CONTINUATION = re.compile(r"\\[ \t]*\r?\n")


def scan(files: dict[str, str], redactor) -> list[Finding]:
    """Findings for every rule that matches any of `files` (relative path → text).

    One finding per (file, rule), naming the line of the first match but never the matched
    text: findings are logged and shown, and the text may be a secret.
    """
    findings = []
    for rel, text in files.items():
        # Same-length blanks keep match offsets valid in `text` for line numbers.
        joined = _CONTINUATION.sub(lambda m: " " * len(m.group()), text)
        for family, rule, unit, alts in _COMPILED:
            for seq in alts:
                pos = _search(joined, unit, seq)
                if pos is not None:
                    findings.append(Finding(family=FAMILY, code=family,
                                            message=f"{rel}:{_line(text, pos)}: {rule}"))
                    break
        findings.extend(_redaction_findings(rel, text, redactor))
    return findings


def scan_fields(fields: dict[str, str | None], redactor) -> list[Finding]:
    """`secret` findings for a proposal's free-text fields that land outside SKILL.md (the
    evidence quote and the reason go into provenance and history): the same rules as capture,
    so no secret capture would have removed is written by the promoter. PII there is not a
    rejection: those fields are stored redacted."""
    out: list[Finding] = []
    for name, text in fields.items():
        if text:
            out.extend(f for f in _redaction_findings(name, text, redactor) if f.code == "secret")
    return out


def _search(text: str, unit: str, seq: tuple[re.Pattern, ...]) -> int | None:
    """Where `seq` first matches in order within one unit of `text`, or None."""
    first, rest = seq[0], seq[1:]
    if unit == "text":
        m = first.search(text)
        return m.start() if m else None
    checked_until = -1
    for m in first.finditer(text):
        # Within a unit the leftmost start of `first` leaves the most room for the rest, so
        # later starts in an already-checked unit cannot match where it did not.
        if m.start() < checked_until:
            continue
        stop = _UNIT_END[unit].search(text, m.end())
        end = stop.start() if stop else len(text)
        checked_until = end
        pos = m.end()
        for rx in rest:
            n = rx.search(text, pos, end)
            if n is None:
                break
            pos = n.end()
        else:
            return m.start()
    return None


def _redaction_findings(rel: str, text: str, redactor) -> list[Finding]:
    # Secrets always count; PII only when it is not an obvious placeholder.
    # A kind not known as PII counts as a secret: the safe side.
    out, seen = [], set()
    for kind, start, _end in redactor.find(text, allow_placeholders=True):
        if kind in seen:
            continue
        seen.add(kind)
        code = "pii" if kind in redactor.pii_kinds else "secret"
        out.append(Finding(family=FAMILY, code=code,
                           message=f"{rel}:{_line(text, start)}: {kind} (redaction rule)"))
    return out


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
