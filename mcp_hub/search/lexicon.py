"""Everyday words for what tools do, and the words tool descriptions use for it.

A person asks to "undo my last commit" or "open a PR"; a git server's tool "unstages changes"
and a GitHub server's "creates a pull request". `expand` adds, to the words of a request, the
words tools use for what those words mean: abbreviations (PR, repo, MR, db, js), synonyms
(folder: directory, ticket: issue, undo: reset) and the usual way of saying a task ("how far":
distance, "near me": local places). It is general vocabulary of software, files, chat, maps and
the web, not a list of any server's tool names.
"""

from __future__ import annotations

import re

_PHRASES: dict[str, str] = {
    # version control
    "undo": "reset revert",
    "revert": "reset",
    "roll back": "reset revert",
    "unstage": "reset staged",
    "history": "log commits",
    "save my work": "commit",
    "check in": "commit",
    "switch": "checkout branch",
    "stage": "add staged",
    "changed": "status diff changes",
    "compare": "diff differences",
    "pr": "pull request",
    "prs": "pull requests",
    "mr": "merge request",
    "repo": "repository",
    "repos": "repositories",
    "ticket": "issue",
    "bug": "issue",
    "bugs": "issues",
    "close": "update issue state",
    "reopen": "update issue state",
    "copy of": "fork",
    "clone": "fork",
    "ship": "merge",
    "land": "merge",
    "ci": "status checks",
    "build pass": "status checks",
    "approve": "review",
    "lgtm": "review",
    "touch": "files changed",
    # memory
    "remember": "memory knowledge graph entities observations",
    "recall": "memory knowledge graph search",
    "fact": "observations entities",
    "memories": "memory knowledge graph",
    "forget": "delete entities memory",
    "know about": "knowledge graph search nodes",
    # files
    "folder": "directory",
    "folders": "directories",
    "photo": "image media",
    "picture": "image media",
    "pic": "image media",
    "space": "sizes",
    "rename": "move",
    "modified": "metadata info",
    "jot": "write",
    "write down": "write",
    "layout": "tree structure",
    "inside": "contents read",
    "open": "read",
    # web
    "web page": "url fetch contents",
    "webpage": "url fetch contents",
    "website": "url fetch",
    "download": "fetch url",
    "google": "web search",
    "online": "web search",
    "news": "web search",
    "browser": "navigate page",
    "go to": "navigate url",
    "visit": "navigate url",
    "capture": "screenshot",
    "press": "click",
    "button": "click element",
    "type": "fill input field",
    "form": "fill input field",
    "js": "javascript execute evaluate",
    "script": "javascript execute evaluate",
    # maps
    "near me": "local places businesses",
    "nearby": "local places businesses",
    "restaurant": "local places",
    "cafe": "place",
    "drive": "directions route",
    "route": "directions",
    "how long": "distance travel time",
    "how far": "distance",
    "lat": "coordinates geocode",
    "long": "coordinates",
    "latitude": "coordinates geocode",
    "longitude": "coordinates geocode",
    "street": "address reverse geocode",
    "sea level": "elevation",
    "altitude": "elevation",
    "hours": "place details",
    "phone number": "place details",
    # chat
    "tell": "post message",
    "announce": "post message",
    "saying": "messages history",
    "thumbs up": "reaction emoji",
    "react": "reaction emoji",
    "answer": "reply thread",
    "respond": "reply thread",
    "team": "users workspace",
    "job title": "user profile",
    "rooms": "channels",
    # data
    "database": "sql query",
    "db": "sql query",
    "table": "sql query",
    "rows": "sql query",
    # the rest
    "sum": "sum numbers",
    "plus": "sum numbers",
    "add up": "sum numbers",
    "repeat back": "echo",
    "environment": "env variables",
    "step by step": "thinking problem solving",
    "think through": "thinking problem solving",
    "zip": "compress gzip",
    "compress": "gzip",
}

_PATTERN = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _PHRASES), key=len, reverse=True)) + r")\b")


def expand(request: str) -> str:
    """`request` followed by the tools' words for the everyday words it uses."""
    lowered = request.lower()
    added = [_PHRASES[found] for found in _PATTERN.findall(lowered)]
    return " ".join([request, *added]) if added else request
