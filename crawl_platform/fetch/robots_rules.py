"""A robots.txt body read into its groups, with each agent's rules matched through Protego, bounded.

:mod:`.robots` asks :class:`RobotsRules` whether a URL is allowed for a product token and what its
crawl delay is. Reading the file (which lines form a group, the group of a token, RFC 9309 section
2.2.1) happens here; Protego (Scrapy's RFC 9309 matcher: percent-encoding normalised, longest match
wins, ``*`` and ``$``) is given one agent's rules only, as a small file rebuilt at the first question
for that agent. Given a whole file, Protego adds each rule to every agent of its group, so a body of
thousands of ``User-agent`` lines followed by thousands of rules costs time and memory in their
product, and the body is cached, so every later run would pay it again. Here each rule is stored
once per group, and the work for one agent is proportional to the lines of its own groups.

Matching is bounded too. Protego matches a ``*`` rule with ``str.find`` from left to right, so a
question costs about the URL's length times the text of the agent's wildcard rules, with the GIL
held. An agent's wildcard rules are kept up to :data:`WILDCARD_BUDGET` characters, in file order,
and the rules past it are ignored, as the RFC lets a crawler ignore what a file holds past its
size limit; exact duplicates are dropped first. Plain rules cost a prefix comparison each and are
all kept. Lines are read as Protego reads them: ``field: value`` or ``field value``, with
Protego's spellings (``User agent``, ``Dissallow``); the parse never raises, and a URL Protego
cannot read is disallowed (canonical URLs never are).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from protego import Protego

WILDCARD_BUDGET = 32 * 1024
"""Characters of ``*`` rules kept per agent, about a thousand rules (one with a ``$`` counts twice:
Protego matches it twice); past it, the agent's later ``*`` rules are ignored."""

_AGENT, _ALLOW, _DISALLOW, _DELAY, _SITEMAP = "user-agent", "allow", "disallow", "crawl-delay", "sitemap"
_FIELDS = {
    "user-agent": _AGENT, "useragent": _AGENT, "user agent": _AGENT,
    "allow": _ALLOW,
    "disallow": _DISALLOW, "dissallow": _DISALLOW, "dissalow": _DISALLOW, "disalow": _DISALLOW,
    "diasllow": _DISALLOW, "disallaw": _DISALLOW,
    "sitemap": _SITEMAP, "sitemaps": _SITEMAP, "site-map": _SITEMAP,
    "crawl-delay": _DELAY, "crawl delay": _DELAY,
    "request-rate": "request-rate", "request rate": "request-rate",
    "visit-time": "visit-time", "visit time": "visit-time",
    "host": "host",
}
_SITE_WIDE = frozenset({_SITEMAP, "host"})  # directives outside any group: they do not end one
_KEPT = frozenset({_ALLOW, _DISALLOW, _DELAY})  # what an agent's small file holds


def _directive(line: str) -> tuple[str, str] | None:
    """(field, value) of a line as Protego reads it, field in canonical spelling when known;
    None for a blank line or one that is no directive."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    name, colon, value = line.partition(":")
    name = name.strip().lower()
    if colon and name in _FIELDS:
        return _FIELDS[name], value.strip()
    if colon and (not value or value[0].isspace()):
        return name, value.strip()  # an unknown directive: it still ends a run of agent lines
    words = line.split()
    for count in (1, 2):  # "Disallow /x", "User agent foo", "Sitemap https://..."
        spelled = " ".join(words[:count]).lower()
        if spelled in _FIELDS:
            return _FIELDS[spelled], " ".join(words[count:])
    return (name, value.strip()) if colon else None


@dataclass
class _Group:
    """The lines of one group (stored once, however many agents share it)."""

    lines: list[tuple[str, str]] = field(default_factory=list)


class RobotsRules:
    """One robots.txt body's groups; :meth:`allows` and :meth:`crawl_delay` answer per product
    token (the token's own group if the file has one, else ``*``, else no rules). Thread-safe."""

    def __init__(self, text: str) -> None:
        # Lone surrogates (a body stored by another producer) would make Protego's quoting raise.
        text = text.encode("utf-8", "replace").decode("utf-8")
        self.sitemaps: tuple[str, ...] = ()
        self._groups: dict[str, list[_Group]] = {}  # agent (lower case) -> its groups, in file order
        self._matchers: dict[str, Protego] = {}
        self._lock = threading.Lock()
        self._read(text)

    def allows(self, url: str, token: str) -> bool:
        """Whether the rules that apply to ``token`` allow ``url``; False when Protego cannot read it."""
        matcher = self._matcher(token)
        if matcher is None:
            return True
        try:
            return bool(matcher.can_fetch(url, "*"))
        except Exception:  # a URL Protego cannot split is not fetched, whatever it raised
            return False

    def crawl_delay(self, token: str) -> float | None:
        matcher = self._matcher(token)
        if matcher is None:
            return None
        delay = matcher.crawl_delay("*")
        return float(delay) if delay is not None else None

    def _read(self, text: str) -> None:
        """Split the file into groups as RFC 9309 and Protego do: a group is a run of agent lines
        and the rules after them; an agent named in several groups gets all their rules."""
        sitemaps: list[str] = []
        group: _Group | None = None
        previous: str | None = None
        for line in text.splitlines():
            parsed = _directive(line)
            if parsed is None:
                continue
            name, value = parsed
            if name == _AGENT and previous != _AGENT:
                group = None  # an agent line after a rule (or first) starts a group
            if name not in _SITE_WIDE:
                previous = name
            if not value:
                continue
            if name == _SITEMAP:
                sitemaps.append(value)
            elif name == _AGENT:
                if group is None:
                    group = _Group()
                agent = value.lower()
                for each in {agent, agent.replace("*", "") if agent != "*" else agent} - {""}:
                    groups = self._groups.setdefault(each, [])
                    if not groups or groups[-1] is not group:
                        groups.append(group)
            elif group is not None and name in _KEPT:
                group.lines.append((name, value))
        self.sitemaps = tuple(sitemaps)

    def _matcher(self, token: str) -> Protego | None:
        """Protego over the rules that apply to ``token``, built at its first question; None when
        no group applies."""
        agent = token if token in self._groups else "*"
        if agent not in self._groups:
            return None
        with self._lock:
            if agent not in self._matchers:
                self._matchers[agent] = self._build(agent)
            return self._matchers[agent]

    def _build(self, agent: str) -> Protego:
        """Protego over ``agent``'s lines as one small file: exact duplicate rules dropped (a
        repeated crawl delay is kept, the last valid one counts), ``*`` rules cut at the budget."""
        seen: set[tuple[str, str]] = set()
        lines = ["user-agent: *"]
        spent = 0
        for group in self._groups[agent]:
            for name, value in group.lines:
                if name != _DELAY:
                    if (name, value) in seen:
                        continue
                    seen.add((name, value))
                    if "*" in value:
                        spent += len(value) * (2 if "$" in value else 1)
                        if spent > WILDCARD_BUDGET:
                            continue
                lines.append(f"{name}: {value}")
        try:
            return Protego.parse("\n".join(lines))
        except Exception:  # rules Protego cannot read: disallow all (the polite reading)
            return Protego.parse("user-agent: *\ndisallow: /")
