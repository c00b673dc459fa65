"""The sync repository's git plumbing: a plain clone under the state dir, driven by the `git`
the user already has (remotes, credentials and transports are git's, none of ours).

Every command runs with a bounded time, no terminal prompt (a credential git cannot find is a
refusal, never a hang) and none of the caller's `GIT_*` variables (a hook's `GIT_DIR` must not
point the round at another repository)."""

import os
import subprocess
import tempfile

BRANCH = "main"
TIMEOUT_S = 120.0


class GitError(Exception):
    """A git command failed: `reason` is one short line for `status` and `doctor`."""

    def __init__(self, reason: str, *, rejected: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.rejected = rejected  # a push refused as not a fast-forward: fetch and retry


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", SSH_ASKPASS="true",
               GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=20")
    if "GIT_SSH_COMMAND" in os.environ:  # the user's own ssh command wins
        env["GIT_SSH_COMMAND"] = os.environ["GIT_SSH_COMMAND"]
    return env


def git(repo: str, *args: str, data: bytes | None = None, check: bool = True,
        timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    cmd = ["git", "-C", repo, "-c", "user.name=autoharness", "-c",
           "user.email=autoharness@localhost", "-c", "commit.gpgsign=false",
           "-c", "core.hooksPath=/dev/null", *args]
    try:
        out = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=_env())
    except FileNotFoundError:
        raise GitError("git is not installed: install git, then run `autoharnessctl sync`") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {timeout:.0f}s (is the remote reachable?)") from None
    if check and out.returncode != 0:
        raise GitError(_first_line(out.stderr) or f"git {args[0]} failed ({out.returncode})",
                       rejected=_is_rejection(out.stderr))
    return out


def _first_line(err: bytes) -> str:
    """Why git failed, in one line: its `fatal:`/`error:` line, with what the remote said
    (a hook's refusal) when it said something; hints and progress are left out."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("remote:") and ln != "remote:"]
    why = next((ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:", "!"))),
               lines[-1] if lines else "")
    if said:
        why = f"{why} ({said[0]})"
    return why[:300]


def _is_rejection(err: bytes) -> bool:
    text = err.decode("utf-8", "replace")
    return "non-fast-forward" in text or "[rejected]" in text or "fetch first" in text


def init(repo: str, remote: str) -> None:
    """An empty repository whose `origin` is `remote` (nothing is fetched yet)."""
    os.makedirs(repo, mode=0o700, exist_ok=True)
    git(repo, "init", "-q", "-b", BRANCH)
    have = git(repo, "remote", check=False).stdout.decode().split()
    if "origin" in have:
        git(repo, "remote", "set-url", "origin", remote)
    else:
        git(repo, "remote", "add", "origin", remote)


def fetch(repo: str) -> str | None:
    """Fetch the remote branch; its tip, or None while the remote has no such branch yet."""
    git(repo, "fetch", "-q", "--no-tags", "origin",
        f"+refs/heads/{BRANCH}:refs/remotes/origin/{BRANCH}", check=False)
    # a missing branch is a fresh remote; an unreachable one must fail: ask it directly
    probe = git(repo, "ls-remote", "--heads", "origin", BRANCH)
    if not probe.stdout.strip():
        return None
    return rev(repo, f"refs/remotes/origin/{BRANCH}")


def rev(repo: str, ref: str) -> str | None:
    out = git(repo, "rev-parse", "-q", "--verify", ref + "^{commit}", check=False)
    return out.stdout.decode().strip() or None if out.returncode == 0 else None


def has_commit(repo: str, sha: str) -> bool:
    return git(repo, "cat-file", "-e", sha + "^{commit}", check=False).returncode == 0


def tree_files(repo: str, commit: str | None, prefix: str = "") -> dict[str, bytes]:
    """Every file of `commit` under `prefix` (path relative to the repository root -> bytes);
    {} for no commit. Symlinks and submodules are not files of ours and are left out."""
    if not commit:
        return {}
    ls = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, *([prefix] if prefix else []))
    entries = []
    for item in ls.stdout.split(b"\0"):
        if not item:
            continue
        meta, path = item.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode in (b"100644", b"100755"):
            entries.append((os.fsdecode(path), sha.decode()))
    if not entries:
        return {}
    batch = git(repo, "cat-file", "--batch", data=b"".join(s.encode() + b"\n" for _, s in entries))
    out, buf, pos = {}, batch.stdout, 0
    for path, _sha in entries:
        end = buf.index(b"\n", pos)
        size = int(buf[pos:end].split()[2])
        out[path] = buf[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return out


def reset_to(repo: str, commit: str | None) -> None:
    """Make the work tree and the branch exactly `commit` (an empty tree when None): whatever
    an interrupted round left behind, committed or not, is dropped."""
    lock = os.path.join(repo, ".git", "index.lock")
    if os.path.exists(lock):  # a killed git of ours (rounds never overlap: we hold the lock)
        os.unlink(lock)
    if commit:
        git(repo, "checkout", "-q", "-f", "-B", BRANCH, commit)
        git(repo, "reset", "-q", "--hard", commit)
    else:  # a remote with nothing yet: an unborn branch and an empty tree
        git(repo, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
        git(repo, "update-ref", "-d", f"refs/heads/{BRANCH}", check=False)
        git(repo, "read-tree", "--empty")
    git(repo, "clean", "-q", "-f", "-d", "-x")


def commit_all(repo: str, message: str) -> str | None:
    """Stage the whole work tree and commit it; the new commit, or None when nothing changed."""
    git(repo, "add", "-A")
    if git(repo, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    git(repo, "commit", "-q", "-m", message)
    return rev(repo, "HEAD")


def push(repo: str) -> None:
    git(repo, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")


def merge_text(base: str, ours: str, theirs: str) -> str | None:
    """A clean three-way merge of one text (git merge-file), or None when the two changes
    overlap."""
    with tempfile.TemporaryDirectory(prefix="ah-merge-") as d:
        names = []
        for label, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            p = os.path.join(d, label)
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            names.append(p)
        out = subprocess.run(["git", "merge-file", "-p", *names], capture_output=True,
                             timeout=TIMEOUT_S, env=_env())
    if out.returncode != 0:  # > 0: that many conflicts; < 0: an error
        return None
    return out.stdout.decode("utf-8")
