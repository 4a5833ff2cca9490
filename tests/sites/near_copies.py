"""A generated news site with planted copies, for the near-duplicate tests (served by `HostileSite.static`).

`near_copy_site(n_articles, seed)` renders a home page linking to every page, and `n_articles`
distinct articles (`/news/<k>`: a few hundred generated words each) inside the same heavy site
chrome (a navigation bar listing every article, a sidebar, a footer), so the pages' full text is
much alike while their main text is not. Then it plants copies of three articles:
- a printer version, `/news/1/print`: the same article in a bare layout with a "printed from" line;
- tracking variants, `/news/2?ref=newsletter` and `/news/2?ref=feed`: the same page with a session
  id and a "you came from" note in its sidebar;
- an exact mirror, `/mirror/news/3`: the very bytes of `/news/3`.
It returns the pages (path -> HTML bytes) and the planted groups as sets of paths, which a correct
near-duplicate finder must find, and nothing else. `serve_near_copy_site()` serves them on loopback
(a `HostileSite` with static replies and a robots.txt that allows all).
"""

from __future__ import annotations

import contextlib
import html
import random
from collections.abc import Iterator

from tests.sites.hostile import HostileSite, Reply

WORDS = (
    "harbour", "council", "budget", "river", "school", "festival", "railway", "library", "market", "storm",
    "museum", "bridge", "election", "farmers", "orchestra", "hospital", "airport", "forest", "village",
    "mayor", "students", "bakery", "tunnel", "garden", "lighthouse", "stadium", "factory", "ferry", "castle",
    "opens", "closes", "plans", "delays", "celebrates", "approves", "rejects", "repairs", "expands", "records",
    "new", "old", "local", "record", "quiet", "busy", "early", "late", "northern", "southern",
)


def _article_text(rng: random.Random) -> list[str]:
    def sentence() -> str:
        return " ".join(rng.choices(WORDS, k=rng.randint(8, 16))).capitalize() + "."

    return [" ".join(sentence() for _ in range(rng.randint(4, 6))) for _ in range(rng.randint(5, 7))]


def _chrome(title: str, body: str, nav: list[str], extra: str = "") -> bytes:
    e = html.escape
    links = "".join(f'<li><a href="{e(h)}">Story {e(h.rsplit("/", 1)[-1])}</a></li>' for h in nav)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title></head><body>"
            f"<header><div class='logo'>The Daily Harbour</div><nav><ul>{links}</ul></nav></header>"
            f"<aside class='sidebar'><h3>Most read</h3><ul>{links}</ul><p>Subscribe to our newsletter "
            f"for the latest local news every morning.</p>{extra}</aside>"
            f"<main><article><h1>{e(title)}</h1>{body}</article></main>"
            f"<footer><p>Copyright The Daily Harbour. All rights reserved. Contact us, advertise, privacy "
            f"policy, terms of use.</p></footer></body></html>").encode()


def near_copy_site(n_articles: int = 12, seed: int = 5) -> tuple[dict[str, bytes], list[set[str]]]:
    """(path -> page bytes, planted groups of paths); see the module docstring."""
    rng = random.Random(seed)  # reproducible, not secret
    articles = {f"/news/{k}": (f"Story {k}: {' '.join(rng.choices(WORDS, k=4))}", _article_text(rng))
                for k in range(n_articles)}
    nav = list(articles)
    pages: dict[str, bytes] = {}
    for path, (title, paragraphs) in articles.items():
        body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        pages[path] = _chrome(title, body, nav)
    title, paragraphs = articles["/news/1"]
    pages["/news/1/print"] = (
        f"<!DOCTYPE html><html><head><title>{html.escape(title)} (print)</title></head><body><article>"
        f"<h1>{html.escape(title)}</h1>{''.join(f'<p>{html.escape(p)}</p>' for p in paragraphs)}"
        f"</article><p class='printed'>Printed from The Daily Harbour</p></body></html>").encode()
    title, paragraphs = articles["/news/2"]
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    for ref, session in (("newsletter", "a81f3c"), ("feed", "9d20be")):
        note = f"<div class='tracking'>You came from our {ref}. Session {session}.</div>"
        pages[f"/news/2?ref={ref}"] = _chrome(title, body, nav, note)
    pages["/mirror/news/3"] = pages["/news/3"]
    home_links = "".join(f'<a href="{html.escape(p)}">{html.escape(p)}</a> ' for p in pages)
    pages["/"] = (f"<!DOCTYPE html><html><head><title>The Daily Harbour</title></head><body>"
                  f"<h1>Today</h1><p>{home_links}</p></body></html>").encode()
    planted = [{"/news/1", "/news/1/print"}, {"/news/2", "/news/2?ref=newsletter", "/news/2?ref=feed"},
               {"/news/3", "/mirror/news/3"}]
    return pages, planted


@contextlib.contextmanager
def serve_near_copy_site() -> Iterator[tuple[HostileSite, dict[str, bytes], list[set[str]]]]:
    """The site on 127.0.0.1: (server, pages, planted groups)."""
    pages, planted = near_copy_site()
    with HostileSite() as site:
        site.robots = Reply(200, b"User-agent: *\nAllow: /\n", {"Content-Type": "text/plain"})
        site.static.update({path: Reply(200, body) for path, body in pages.items()})
        yield site, pages, planted
