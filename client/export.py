"""`autoharnessctl skills export --plugin DIR`: the live autoharness-owned skills as a Claude
Code plugin (and optionally a marketplace), for sharing org-wide through a plugin marketplace.

Read-only on the skill library; the plugin is built in a temp dir next to DIR and swapped in,
so DIR is always either the previous export or the new one. Nothing leaves the machine: the
operator commits or hosts DIR. Provenance keeps the history of each landing but no machine
path (the `target` is dropped, home directories in evidence quotes become `~`).
"""

import json
import os
import re
import secrets
import shutil
import struct
import zlib

from ..daemon import offline
from ..protocol import VERSION

# Marks a directory as one we exported, so a later export may replace it.
MARKER = ".autoharness-export"
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SPDX = re.compile(r"[A-Za-z0-9.+-]+(?: (?:AND|OR|WITH) [A-Za-z0-9.+-]+)*")
_HOME = re.compile(r"(?<![\w.-])(?:/home/[^/\s\"']+|/Users/[^/\s\"']+|/root(?![\w.-])|"
                   r"[A-Za-z]:\\\\?Users\\\\?[^\\\s\"']+)")
# Provenance keys that are about this machine, not the skill's history.
_MACHINE_KEYS = ("target",)


class ExportError(Exception):
    """Something the operator must fix; the message says what."""


def scrub(text: str, home: str) -> str:
    """Home directories (this user's and any other's) replaced by `~`."""
    if len(home) > 1:
        text = text.replace(home, "~")
    return _HOME.sub("~", text)


def public_provenance(data: bytes, home: str) -> bytes:
    rec = json.loads(data)
    for k in _MACHINE_KEYS:
        rec.pop(k, None)
    for x in rec.get("landings") or []:
        if isinstance(x, dict) and isinstance(x.get("reason"), str):
            x["reason"] = scrub(x["reason"], home)
    return (json.dumps(rec, indent=1) + "\n").encode()


def collect(layers: list[str], project: str | None) -> list:
    """Live, autoharness-owned skills of the layers, project first; one per name."""
    seen, out = set(), []
    infos = offline.list_skills(project if "project" in layers else None)
    for info in sorted(infos, key=lambda i: (i.layer != "project", i.name)):
        if (info.status == "live" and info.owner == "autoharness" and info.layer in layers
                and info.name not in seen):
            seen.add(info.name)
            out.append(info)
    return out


DEFAULT_LICENSE = "LicenseRef-Proprietary"  # grants nothing until the owner picks a licence


def manifests(name: str, skills: list, owner: str,
              license: str = DEFAULT_LICENSE) -> dict[str, dict]:
    desc = (f"{len(skills)} skill(s) learned by autoharness from real sessions and kept "
            "under review: " + ", ".join(s.name for s in skills[:12])
            + (", ..." if len(skills) > 12 else ""))
    plugin = {"name": name, "version": VERSION, "description": desc,
              "author": {"name": owner}, "license": license,
              "keywords": ["skills", "autoharness"],
              "network": {"hosts": []}}  # skills only: nothing reaches the network
    market = {"name": name, "owner": {"name": owner},
              "description": f"Skills learned by autoharness, shared by {owner}.",
              "plugins": [{"name": name, "source": "./", "description": desc,
                           "version": VERSION}]}
    return {"plugin.json": plugin, "marketplace.json": market}


ICON = ".claude-plugin/icon.png"  # where `claude plugin validate` looks for the listing icon
ICON_SIZE = 512  # the plugin directory takes square PNGs of 512 to 2048 px


def icon_png(size: int = ICON_SIZE) -> bytes:
    """autoharness's listing icon, drawn here (a ring on a dark square) so that no binary file
    has to ship in the wheel: the same bytes every time."""
    bg, fg = b"\x1f\x2a\x44", b"\xf0\x8c\x2e"
    c, outer, inner = (size - 1) / 2, size * 0.36, size * 0.22
    rows = []
    for y in range(size):
        row = bytearray(b"\x00")  # filter: none
        for x in range(size):
            d = ((x - c) ** 2 + (y - c) ** 2) ** 0.5
            row += fg if inner <= d <= outer else bg
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


def readme(name: str, skills: list, owner: str, marketplace: bool) -> str:
    """The plugin's README.md: what it is, what it holds, how to install it (the plugin
    directory refuses a plugin without one)."""
    lines = [f"# {name}", "",
             f"Skills for Claude Code that autoharness learned from real sessions of {owner}: "
             "each one was proposed from a session's own transcript, checked by autoharness's "
             "promoter (well-formed, safe, quoting the session it came from) and kept under "
             "review before it was exported here. Claude Code loads a skill when its "
             "description matches the task at hand.", "", "## Skills", ""]
    lines += [f"- `{s.name}` ({s.layer} layer, version {s.version})" for s in skills] or [
        "- none yet"]
    lines += ["", "## Install", ""]
    if marketplace:
        lines += ["Add this directory (or the repository that hosts it) as a marketplace, "
                  "then install the plugin:", "", "```",
                  "/plugin marketplace add <path or URL of this directory>",
                  f"/plugin install {name}@{name}", "```"]
    else:
        lines += ["List this directory in a plugin marketplace, or try it for one session "
                  "with `claude --plugin-dir <this directory>`."]
    lines += ["", "Each skill's `.autoharness/provenance.json` records its landings: when, "
              "from which proposal, and why.", ""]
    return "\n".join(lines)


def export(dest: str, *, layers: list[str], project: str | None, name: str, owner: str,
           marketplace: bool, license: str = DEFAULT_LICENSE) -> list:
    """Write the plugin at `dest` (replacing an earlier export); return the skills exported."""
    if not _SPDX.fullmatch(license):
        raise ExportError(f"licence {license!r}: give an SPDX id (e.g. --license MIT, or "
                          "LicenseRef-Proprietary)")
    if not _NAME.fullmatch(name):
        raise ExportError(f"plugin name {name!r}: use lower-case letters, digits and hyphens "
                          "(e.g. --name team-skills)")
    dest = os.path.abspath(dest)
    if os.path.lexists(dest):
        if os.path.islink(dest) or not os.path.isdir(dest):
            raise ExportError(f"{dest} exists and is not a directory: pick another --plugin DIR")
        if os.listdir(dest) and not os.path.isfile(os.path.join(dest, MARKER)):
            raise ExportError(f"{dest} is not empty and not an earlier export: pick an empty "
                              "or new directory")
    skills = collect(layers, project)
    home = os.path.expanduser("~")
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f"{offline.TMP_PREFIX}{os.path.basename(dest)}-{secrets.token_hex(4)}")
    os.makedirs(os.path.join(tmp, ".claude-plugin"))
    try:
        for info in skills:
            for file in offline.skill_files(info.path):
                data = file.data
                if file.kind == "provenance":
                    data = public_provenance(data, home)
                elif file.kind == "evidence":
                    data = scrub(data.decode("utf-8", "replace"), home).encode()
                out = os.path.join(tmp, "skills", info.name, *file.rel.split("/"))
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(data)
        for fn, obj in manifests(name, skills, owner, license).items():
            if fn == "marketplace.json" and not marketplace:
                continue
            with open(os.path.join(tmp, ".claude-plugin", fn), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2)
                f.write("\n")
        with open(os.path.join(tmp, ICON), "wb") as f:
            f.write(icon_png())
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write(readme(name, skills, owner, marketplace))
        with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as f:
            f.write("exported by autoharnessctl skills export; replaced by the next export\n")
        old = None
        if os.path.isdir(dest):
            old = os.path.join(parent, f"{offline.TMP_PREFIX}old-{secrets.token_hex(4)}")
            os.rename(dest, old)
        os.rename(tmp, dest)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return skills
