"""Git mode: project-layer landings become commits on a review branch, never files.

The promoter shapes and validates a landing against a *mirror*: a private copy, in the state
dir, of the branch tip's `.claude/skills` subtree. Landing writes the mirror as in the other
modes, then builds one commit from it with plumbing only:

    GIT_INDEX_FILE=<temp> git read-tree <tip>          a private index, never the user's
    git update-index --force-remove / --index-info      swap in the skill's subtree
    git write-tree; git commit-tree -p <tip>            one commit per landing
    git update-ref refs/heads/<branch> <new> <tip>      compare-and-swap on the branch

So the user's working tree, index, HEAD and current branch are never read for writing nor
written, and a landing mid-rebase or with uncommitted changes is the same as any other. A tip
moved by someone else (fetch, merge, another landing) is built upon, never rewritten: the
compare-and-swap fails and the commit is rebuilt on the new tip, unless that tip changed the
very skill being landed, which fails the landing instead of overwriting the other change.

Provenance inside the mirror names the mirror path (that is what ownership checks compare);
in commits it names where the skill lives in the project once merged, so a skill merged from
the branch into the working tree is recognised as autoharness's through its mirror twin.
"""

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tomllib
from dataclasses import dataclass

from ...protocol import paths
from ..capture.source import open_regular
from ..persist.files import write_atomic
from . import fileops
from .plan import PROVENANCE, TMP_PREFIX

PROJECT_CONFIG = os.path.join(".claude", "autoharness.toml")
SKILLS_REL = os.path.join(".claude", "skills")
ZERO = "0" * 40
# Variables that would point git at another repository, index or tree than the one we name.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                  "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_COMMON_DIR",
                  "GIT_PREFIX")
AUTHOR = ("autoharness", "autoharness@localhost")
CAS_ATTEMPTS = 5


class GitError(OSError):
    """A git command failed; the message names the command and git's own words."""


@dataclass(frozen=True)
class Target:
    """Where a project's skills go in git mode."""

    top: str  # the worktree root git reports (commands run here)
    branch: str  # short name, e.g. autoharness/skills
    prefix: str  # the skills dir relative to `top`, '/'-separated
    real_root: str  # the project's skills dir in the working tree (where a merge puts them)
    project: str  # the project root (what archives record as their anchor)
    base: str  # <state>/git/<key>: the mirror's home (the anchor for containment)

    @property
    def mirror_root(self) -> str:
        return os.path.join(self.base, "skills")

    @property
    def ref(self) -> str:
        return f"refs/heads/{self.branch}"


def git_env(extra: dict | None = None) -> dict:
    """The environment every git command of the promoter runs in: pointed at no other
    repository, index or tree than the one named, never prompting, never writing the index."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # never refresh (write) the user's index as a side effect
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    env.update(extra or {})
    return env


def git(top: str, *args: str, input: bytes | None = None, env: dict | None = None,
        check: bool = True) -> str:
    """Run `git -C top args...`; stdout (str). A failure raises GitError unless check=False
    (then stdout is "" on failure)."""
    try:
        r = subprocess.run(["git", "-C", top, *args], input=input, capture_output=True,
                           env=git_env(env), timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GitError(f"git {args[0]}: {e}") from None
    if r.returncode != 0:
        if not check:
            return ""
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {err[-1] if err else f'exit {r.returncode}'}")
    return r.stdout.decode("utf-8", "surrogateescape")


def _git_bytes(top: str, *args: str, input: bytes | None = None) -> bytes:
    r = subprocess.run(["git", "-C", top, *args], input=input, capture_output=True,
                       env=git_env(), timeout=60)
    if r.returncode != 0:
        raise GitError(f"git {args[0]} failed: {r.stderr.decode('utf-8', 'replace').strip()}")
    return r.stdout


# -- which projects are in git mode -----------------------------------------------------------

def project_settings(project_root: str) -> dict:
    """The `[promoter]` table of the project's `.claude/autoharness.toml` ({} when none)."""
    try:
        # a repository file: a FIFO planted there must fail the open, not hang the promoter
        with open(open_regular(os.path.join(project_root, PROJECT_CONFIG)), "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}
    section = data.get("promoter")
    return section if isinstance(section, dict) else {}


# How far each mode lets a landing go, least first: `review` lands nothing unapproved, `git`
# only commits on a side branch, `auto` writes into the working tree.
REACH = {"review": 0, "git": 1, "auto": 2}


def mode_for(project_root: str | None, cfg) -> tuple[str, str]:
    """(mode, branch) for a project. Its own config file (a repository's to write) may only
    narrow the user's mode (`auto` to `git` or `review`, `git` to `review`), never widen it."""
    mode, branch = cfg.mode, cfg.git_branch
    if project_root:
        s = project_settings(project_root)
        narrower = s.get("mode")
        if isinstance(narrower, str) and REACH.get(narrower, 99) < REACH[mode]:
            mode = narrower
        if isinstance(s.get("git_branch"), str) and s["git_branch"]:
            branch = s["git_branch"]
    return mode, branch


def target_for(project_root: str | None, cfg, state: str) -> Target | None:
    """The git-mode target of a project, or None when the project is not in git mode (or not
    in a git repository with at least one commit: its skills then land as files)."""
    if not project_root or not os.path.isdir(project_root):
        return None
    mode, branch = mode_for(project_root, cfg)
    if mode != "git":
        return None
    if not git(project_root, "check-ref-format", "--branch", branch, check=False).strip():
        return None
    repo = _repo_of(project_root)
    if repo is None:
        return None
    top, common = repo
    real_root = os.path.realpath(os.path.join(project_root, SKILLS_REL))
    prefix = os.path.relpath(real_root, os.path.realpath(top)).replace(os.sep, "/")
    if prefix.startswith(".."):
        return None  # .claude/skills resolves outside the repository
    key = hashlib.sha256("\0".join((os.path.realpath(common), branch, prefix)).encode())
    base = os.path.join(os.path.realpath(state), "git", key.hexdigest()[:24])
    project = os.path.realpath(project_root)
    t = Target(top=top, branch=branch, prefix=prefix, real_root=real_root, project=project,
               base=base)
    paths.make_private_dirs(t.mirror_root)
    meta = {"top": top, "branch": branch, "prefix": prefix, "real_root": real_root,
            "project": project}
    meta_path = os.path.join(base, "target.json")
    if _read_json(meta_path) != meta:
        write_atomic(meta_path, json.dumps(meta).encode())
    return t


_repos: dict[str, tuple[str, str]] = {}


def _repo_of(project_root: str) -> tuple[str, str] | None:
    """(worktree top, common git dir) of the repository holding the project; cached, as a
    project does not change repositories while the daemon runs."""
    key = os.path.realpath(project_root)
    if key not in _repos:
        out = git(key, "rev-parse", "--show-toplevel", "--path-format=absolute",
                  "--git-common-dir", check=False).split("\n")
        if len(out) < 2 or not out[0] or not out[1]:
            return None  # not (yet) a repository: asked again next time
        _repos[key] = (out[0], out[1])
    return _repos[key]


def target_of_root(root: str) -> Target | None:
    """The target whose mirror root is `root` (a landing record's layer root), if any."""
    base = os.path.dirname(root)
    meta = _read_json(os.path.join(base, "target.json"))
    if not isinstance(meta, dict) or os.path.join(base, "skills") != root:
        return None
    try:
        return Target(top=meta["top"], branch=meta["branch"], prefix=meta["prefix"],
                      real_root=meta["real_root"], project=meta["project"], base=base)
    except (KeyError, TypeError):
        return None


def twin(state: str, skill_dir: str) -> str | None:
    """The mirror path of a project skill merged from a review branch, for ownership."""
    gdir = os.path.join(state, "git")
    try:
        keys = os.listdir(gdir)
    except OSError:
        return None
    parent, name = os.path.split(skill_dir)
    for key in keys:
        meta = _read_json(os.path.join(gdir, key, "target.json"))
        if isinstance(meta, dict) and meta.get("real_root") == parent:
            return os.path.join(gdir, key, "skills", name)
    return None


# -- the branch -----------------------------------------------------------------------------

def rev(top: str, ref: str) -> str | None:
    out = git(top, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False).strip()
    return out or None


def default_branch(top: str) -> tuple[str, str] | None:
    """(ref, commit) of the repository's default branch: origin's HEAD, else
    init.defaultBranch, main or master; else the current HEAD commit."""
    candidates = []
    sym = git(top, "symbolic-ref", "-q", "refs/remotes/origin/HEAD", check=False).strip()
    if sym:
        name = sym.removeprefix("refs/remotes/origin/")
        candidates += [f"refs/heads/{name}", sym]
    init = git(top, "config", "--get", "init.defaultBranch", check=False).strip()
    if init:
        candidates.append(f"refs/heads/{init}")
    candidates += ["refs/heads/main", "refs/heads/master", "HEAD"]
    for ref in candidates:
        oid = rev(top, ref)
        if oid:
            return ref, oid
    return None


def tip(t: Target) -> tuple[str | None, str]:
    """(the branch's commit or None when it does not exist yet, the commit to build on)."""
    cur = rev(t.top, t.ref)
    if cur:
        return cur, cur
    d = default_branch(t.top)
    if d is None:
        raise GitError(f"{t.top} has no commits yet: make a first commit, then land again")
    return None, d[1]


def _subtree(top: str, commit: str, path: str) -> str | None:
    out = git(top, "rev-parse", "-q", "--verify", f"{commit}:{path}", check=False).strip()
    return out or None


# -- the mirror -----------------------------------------------------------------------------

def sync(t: Target) -> str:
    """Make the mirror equal to the tip's skills subtree (no-op when it already is); return
    the tip commit. Call with the promoter's lock held: landings write the mirror."""
    _, base = tip(t)
    stamp = os.path.join(t.base, "tip")
    if _read_text(stamp) == base and os.path.isdir(t.mirror_root):
        return base
    fresh = os.path.join(t.base, f"{TMP_PREFIX}sync-{secrets.token_hex(4)}")
    os.makedirs(fresh, mode=0o700)
    listing = _git_bytes(t.top, "ls-tree", "-r", "-z", "--full-tree", base, "--",
                         t.prefix + "/") if t.prefix != "." else b""
    blobs = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, oid = meta.split()
        if kind != b"blob" or mode not in (b"100644", b"100755"):
            continue  # symlinks and submodules are never materialised
        rel = os.fsdecode(path)[len(t.prefix) + 1:]
        if any(p in ("", ".", "..") for p in rel.split("/")):
            continue
        blobs.append((rel, oid.decode()))
    for rel, data in zip([r for r, _ in blobs], _cat_blobs(t.top, [o for _, o in blobs]), strict=False):
        if rel.endswith("/" + PROVENANCE):
            data = _retarget(data, t.real_root, t.mirror_root)
        dest = os.path.join(fresh, *rel.split("/"))
        paths.make_private_dirs(os.path.dirname(dest))
        with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
    old = os.path.join(t.base, f"{TMP_PREFIX}old-{secrets.token_hex(4)}")
    if os.path.isdir(t.mirror_root):
        os.rename(t.mirror_root, old)
    os.rename(fresh, t.mirror_root)
    shutil.rmtree(old, ignore_errors=True)
    write_atomic(stamp, base.encode())
    return base


def mirrored_tip(t: Target) -> str | None:
    """The commit the mirror was last synced to (what a landing is planned on)."""
    return _read_text(os.path.join(t.base, "tip"))


def _cat_blobs(top: str, oids: list[str]) -> list[bytes]:
    if not oids:
        return []
    out = _git_bytes(top, "cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    datas, i = [], 0
    for _ in oids:
        nl = out.index(b"\n", i)
        size = int(out[i:nl].split()[2])
        datas.append(out[nl + 1:nl + 1 + size])
        i = nl + 1 + size + 1
    return datas


def _retarget(data: bytes, src_root: str, dst_root: str) -> bytes:
    """A provenance file naming `src_root/<name>` rewritten to name `dst_root/<name>`."""
    try:
        rec = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if not isinstance(rec, dict) or not isinstance(rec.get("target"), str):
        return data
    parent, name = os.path.split(rec["target"])
    if parent != src_root:
        return data  # not landed for this place: left as it is (and so not ours)
    rec["target"] = os.path.join(dst_root, name)
    return json.dumps(rec, indent=1).encode()


# -- landing ------------------------------------------------------------------------------

def message(rec, evidence: str | None) -> str:
    """The commit message of a landing record: action and skill, the reason, the evidence,
    then trailers."""
    h = rec.history
    lines = [f"autoharness: {h['action']} {h['name']}", ""]
    if h.get("reason"):
        lines += [h["reason"].strip(), ""]
    if evidence:
        lines += ["Evidence:"] + [f"> {ln}" for ln in evidence.strip().splitlines()[:20]] + [""]
    lines.append(f"Autoharness-Intent: {h.get('intent') or 'none'}")
    lines.append(f"Autoharness-Session: {h.get('session') or 'none'}")
    lines.append(f"Autoharness-Landing: {h['landing']}")
    return "\n".join(lines) + "\n"


def find_landing(t: Target, start: str, landing: str, depth: int = 200) -> str | None:
    """The commit within `depth` of `start` that carries `landing`, if any (crash recovery)."""
    out = git(t.top, "log", f"-n{depth}", "--format=%H %(trailers:key=Autoharness-Landing,"
              "valueonly,separator=%x20)", start, check=False)
    for line in out.splitlines():
        oid, _, value = line.partition(" ")
        if value.strip() == landing:
            return oid
    return None


def commit_landing(rec, t: Target, msg: str) -> str:
    """Commit the mirror's copy of the landed skill onto the branch; return the commit.

    Idempotent: a landing already on the branch (a crash after update-ref) is not committed
    twice. Raises GitError when the branch moved and changed this same skill meanwhile.
    """
    name = os.path.basename(rec.target)
    path = f"{t.prefix}/{name}" if t.prefix != "." else name
    planned = rec.git.base
    for _ in range(CAS_ATTEMPTS):
        cur, parent = tip(t)
        done = find_landing(t, parent, rec.id)
        if done:
            return done
        if parent != planned and _subtree(t.top, parent, path) != _subtree(t.top, planned, path):
            raise GitError(f"the branch {t.branch} changed {name} since this landing was "
                           "planned: nothing was committed")
        tree = _tree_with(t, parent, path, os.path.join(t.mirror_root, name))
        new = git(t.top, "commit-tree", "--no-gpg-sign", tree, "-p", parent,
                  input=msg.encode(), env=_identity(t)).strip()
        # compare-and-swap: fails (and we rebuild) if the branch moved since we read it
        git(t.top, "update-ref", "-m", f"autoharness: landing {rec.id}", t.ref, new,
            cur or ZERO, check=False, env=_identity(t))
        if rev(t.top, t.ref) == new:
            stamp = os.path.join(t.base, "tip")
            if parent == planned:
                write_atomic(stamp, new.encode())  # the mirror is the new tip already
            else:
                fileops.unlink(stamp)  # other skills moved: resync before the next read
            return new
    raise GitError(f"the branch {t.branch} kept moving: gave up after {CAS_ATTEMPTS} tries")


def _tree_with(t: Target, parent: str, path: str, skill_dir: str) -> str:
    """The tree of `parent` with `path` replaced by the files under `skill_dir` (gone if
    the directory is), built in a private index file."""
    index = os.path.join(t.base, f"{TMP_PREFIX}index-{secrets.token_hex(4)}")
    env = {"GIT_INDEX_FILE": index}
    try:
        git(t.top, "read-tree", parent, env=env)
        old = git(t.top, "ls-files", "-z", "--", path + "/", env=env)
        if old:
            git(t.top, "update-index", "-z", "--force-remove", "--stdin", input=old.encode(
                "utf-8", "surrogateescape"), env=env)
        lines = []
        for rel in fileops.all_files(skill_dir):
            with open(os.path.join(skill_dir, *rel.split("/")), "rb") as f:
                data = f.read()
            if rel == PROVENANCE:
                data = _retarget(data, t.mirror_root, t.real_root)
            oid = git(t.top, "hash-object", "-w", "--stdin", input=data).strip()
            lines.append(f"100644 {oid}\t{path}/{rel}")
        if lines:
            git(t.top, "update-index", "-z", "--index-info",
                input=("\0".join(lines) + "\0").encode("utf-8", "surrogateescape"), env=env)
        return git(t.top, "write-tree", env=env).strip()
    finally:
        fileops.unlink(index)


def _identity(t: Target) -> dict:
    """Authored by autoharness; committed by the user when git knows who that is."""
    env = {"GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1]}
    if not git(t.top, "config", "--get", "user.email", check=False).strip():
        env.update(GIT_COMMITTER_NAME=AUTHOR[0], GIT_COMMITTER_EMAIL=AUTHOR[1])
    return env


def _read_json(path: str):
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):
        return None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
