"""The benchmark's target: a deterministic static site of N article pages, served fast on loopback.

`StaticSite(n_pages, seed)` generates the page graph in memory (a home page, `/articles/<k>.html`
pages with ~20 links each, the same header links on every page, duplicate links within and across
pages, relative and `#fragment` forms of the same URL, off-site and `mailto:` links, and a small
`/private/` section that robots.txt disallows), writes it as files under a directory, and computes
`expected_urls`: the canonical URLs a correct host-scoped, robots-obeying crawler must land, by a
BFS over its own graph. `NginxServer` serves that directory with Debian's nginx as an unprivileged
foreground process on 127.0.0.1:<free port> (config, pid, logs and temp files in a temp directory),
so the server is never the bottleneck; `measure_server_rate` shows its requests/s with a short,
bounded `wrk` run. When nginx is not installed, `serve_site` falls back to the project's
`crawl_platform.cli.demo_site` server (a DemoSite with as many pages and links), and says so.

`serve_hosts(hosts, pages_per_host)` is the polite broad crawl's target: one generated site served
by one nginx on as many loopback addresses (127.0.1.1, 127.0.1.2, ... 127.0.2.250: distinct
hostnames, as Scrapy keys its per-host slots on the hostname), each address a host of its own with
its own robots.txt; `NginxServer.min_gaps_ms` reads each host's smallest gap between two requests
from nginx's own log.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from crawl_platform.cli.demo_site import DemoSite, SiteServer
from crawl_platform.urls import canonicalize

HERE = Path(__file__).resolve().parent
NGINX_TEMPLATE = HERE / "nginx.conf.template"
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
N_PRIVATE = 40
LINKS_PER_PAGE = 20
TREE_FANOUT = 4  # spanning-tree children per page: guarantees every article is reachable from home
HEADER = ("/", "/articles/0.html", "/articles/1.html")  # on every page: duplicates across pages
_WORDS = (
    "crawler", "frontier", "harbor", "lantern", "orchard", "meadow", "signal", "engine", "ledger", "market",
    "garden", "library", "window", "thunder", "silver", "copper", "morning", "evening", "journey", "village",
    "harvest", "compass", "voyage", "quiet", "bright", "ancient", "rapid", "gentle", "steady", "hidden",
    "open", "narrow", "distant", "careful", "curious", "simple", "builds", "follows", "records", "measures",
    "returns", "gathers", "visits", "reads", "writes", "keeps", "finds", "sorts", "river", "mountain",
)


def article(k: int) -> str:
    return f"/articles/{k}.html"


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    paragraphs: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (href exactly as written, anchor text), duplicates kept


class StaticSite:
    """Same (n_pages, seed) -> same files, byte for byte."""

    def __init__(self, n_pages: int, seed: int = 1) -> None:
        if n_pages < 2:
            raise ValueError("need at least 2 pages")
        self.n_pages, self.seed = n_pages, seed
        self.pages = self._generate(random.Random(seed))  # reproducible, not secret

    def _generate(self, rng: random.Random) -> dict[str, Page]:
        n = self.n_pages
        titles = [" ".join(w.capitalize() for w in rng.sample(_WORDS, rng.randint(2, 4))) + f" {k}"
                  for k in range(n)]

        def href(src_dir: str, k: int) -> tuple[str, str]:
            r = rng.random()
            if r < 0.6:
                h = article(k)
            elif r < 0.8:  # document-relative: resolves against the page's directory
                h = f"{k}.html" if src_dir == "/articles/" else f"articles/{k}.html"
            else:
                h = f"{article(k)}#part-{rng.randint(1, 4)}"
            return h, titles[k]

        pages: dict[str, Page] = {}
        home_links = [href("/", k) for k in range(min(n, TREE_FANOUT * 4))]
        pages["/"] = Page("/", "Benchmark Site", _paragraphs(rng), tuple(home_links))
        first_child = min(n, TREE_FANOUT * 4)
        for k in range(n):
            kids = range(first_child + k * TREE_FANOUT, min(n, first_child + (k + 1) * TREE_FANOUT))
            body = [href("/articles/", c) for c in kids]
            body += [href("/articles/", rng.randrange(n)) for _ in range(LINKS_PER_PAGE - len(HEADER) - len(body))]
            if rng.random() < 0.3:
                body.append(rng.choice(body))  # the same link twice on one page
            if rng.random() < 0.02:
                body.append((f"/private/{rng.randrange(N_PRIVATE)}.html", "Staff only"))
            if rng.random() < 0.01:
                body += [("http://127.0.0.2/elsewhere", "Elsewhere"), ("mailto:x@example.invalid", "Mail us")]
            rng.shuffle(body)
            links = [(h, "Home" if h == "/" else titles[int(h.split("/")[-1].split(".")[0])]) for h in HEADER]
            pages[article(k)] = Page(article(k), titles[k], _paragraphs(rng), tuple(links + body))
        for p in range(N_PRIVATE):
            links = [(f"/private/{(p + 1) % N_PRIVATE}.html", "Next secret"), (article(rng.randrange(n)), "Back")]
            pages[f"/private/{p}.html"] = Page(f"/private/{p}.html", f"Private {p}", _paragraphs(rng), tuple(links))
        return pages

    def expected_urls(self, base_url: str) -> set[str]:
        """Canonical URLs a host-scoped crawl from `base_url + "/"` lands: BFS, robots.txt obeyed."""
        base = base_url.rstrip("/")
        netloc = urlsplit(base).netloc
        seen = {"/"}
        queue = deque(["/"])
        while queue:
            path = queue.popleft()
            for h, _ in self.pages[path].links:
                parts = urlsplit(urldefrag(urljoin(base + path, h))[0])
                if parts.scheme != "http" or parts.netloc != netloc:
                    continue
                target = parts.path or "/"
                if target in self.pages and not target.startswith("/private/") and target not in seen:
                    seen.add(target)
                    queue.append(target)
        urls = {base + p for p in seen}
        wrong = [u for u in urls if canonicalize(u) != u]
        if wrong:
            raise AssertionError(f"generator URLs are not canonical: {wrong[:3]}")
        return urls

    def write(self, root: Path) -> int:
        """Write every page, robots.txt and index.html under `root`; returns bytes written."""
        total = 0
        for sub in ("articles", "private"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for path, page in self.pages.items():
            data = _render(page)
            (root / ("index.html" if path == "/" else path.lstrip("/"))).write_bytes(data)
            total += len(data)
        (root / "robots.txt").write_text(ROBOTS_TXT)
        return total


def _paragraphs(rng: random.Random) -> tuple[str, ...]:
    def sentence() -> str:
        return " ".join(rng.choices(_WORDS, k=rng.randint(6, 14))).capitalize() + "."

    return tuple(" ".join(sentence() for _ in range(rng.randint(3, 5))) for _ in range(rng.randint(3, 5)))


def _render(page: Page) -> bytes:
    e = html.escape
    nav = "".join(f'<li><a href="{e(h)}">{e(t)}</a></li>' for h, t in page.links)
    parts = "".join(f'<h2 id="part-{i + 1}">Part {i + 1}</h2><p>{e(p)}</p>' for i, p in enumerate(page.paragraphs))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(page.title)}</title></head>\n'
            f"<body><header><h1>{e(page.title)}</h1></header>\n<article>{parts}</article>\n"
            f"<nav><ul>{nav}</ul></nav>\n</body></html>\n").encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NO_VALIDATORS = "        etag off;\n        if_modified_since off;"
"""nginx directives for a server that ignores validators: no ETag, and a full answer to every
conditional request (``NginxServer(server_extra=...)``; ``compare.py --no-validators``)."""


class NginxServer:
    """nginx in the foreground (`daemon off`) on 127.0.0.1:<port>, as `nobody` when we are root."""

    def __init__(self, root: Path, runtime: Path, port: int | None = None, workers: int = 1,
                 addresses: tuple[str, ...] = ("127.0.0.1",), server_extra: str = "") -> None:
        self.root, self.runtime, self.port = root, runtime, port or free_port()
        self.server_extra = server_extra  # directives added to the server block
        self.workers, self.addresses = workers, addresses
        self.base_url = f"http://{addresses[0]}:{self.port}"
        self.access_log = runtime / "access.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> NginxServer:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.runtime.mkdir(parents=True, exist_ok=True)
        conf = self.runtime / "nginx.conf"
        text = NGINX_TEMPLATE.read_text()
        listen = "\n".join(f"        listen {address}:{self.port};" for address in self.addresses)
        # Each listening socket takes one of a worker's connections: 4,096 for clients on top.
        connections = 4096 + len(self.addresses)
        for key, value in {"workers": self.workers, "runtime": self.runtime, "root": self.root,
                           "listen": listen, "access_log": self.access_log, "connections": connections,
                           "server_extra": self.server_extra}.items():
            text = text.replace(f"@{key}@", str(value))
        conf.write_text(text)
        user: str | None = None
        if os.geteuid() == 0:  # never serve as root: drop to nobody, which must reach the files
            user = "nobody"
            nobody = pwd.getpwnam(user)
            tmp = Path(tempfile.gettempdir())
            for d in {self.root, *self.root.parents, self.runtime, *self.runtime.parents}:
                if d != tmp and d.is_relative_to(tmp):  # mkdtemp makes 0700 directories
                    d.chmod(0o755)
            os.chown(self.runtime, nobody.pw_uid, nobody.pw_gid)
            for f in self.runtime.iterdir():
                os.chown(f, nobody.pw_uid, nobody.pw_gid)
        log = open(self.runtime / "stderr.log", "ab")  # noqa: SIM115 -- the child owns it
        argv = [nginx, "-p", str(self.runtime), "-c", str(conf), "-e", str(self.runtime / "error.log")]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, user=user, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {(self.runtime / 'error.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.addresses[-1], self.port), 0.2):
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start listening")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_offset(self) -> int:
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def requests_since(self, offset: int) -> list[str]:
        """Request targets logged since `offset` (one line per request, as nginx saw them)."""
        if not self.access_log.exists():
            return []
        with self.access_log.open("rb") as f:
            f.seek(offset)
            return [line.split(b'"')[1].decode(errors="replace") for line in f if line.count(b'"') >= 2]

    def min_gaps_ms(self, offset: int, skip: str = "/robots.txt") -> dict[str, float]:
        """Per address (host), the smallest gap in ms between the arrivals of two requests logged
        since `offset`, requests for `skip` left out (a crawler reads robots.txt first, politely or
        not); hosts asked once are left out."""
        arrivals: dict[str, list[float]] = {}
        if self.access_log.exists():
            with self.access_log.open("rb") as f:
                f.seek(offset)
                for line in f:
                    fields = line.split(b'"')
                    if len(fields) < 5 or fields[1].split(b" ")[1:2] == [skip.encode()]:
                        continue
                    msec, address = fields[-1].split()
                    arrivals.setdefault(address.decode(), []).append(float(msec) - float(line.split(b" ", 1)[0]))
        gaps = {}
        for address, times in arrivals.items():
            times.sort()
            if len(times) > 1:
                gaps[address] = 1000 * min(b - a for a, b in itertools.pairwise(times))
        return gaps

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # nginx: fast shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


@dataclass
class ServedSite:
    """What the benchmark needs of a served site, whichever server serves it."""

    base_url: str
    expected: set[str]
    server_kind: str  # "nginx" or "demo_site (fallback)"
    nginx: NginxServer | None
    bytes_on_disk: int = 0
    seeds: list[str] = field(default_factory=list)  # one per host; [seed] when empty

    @property
    def seed(self) -> str:
        return self.base_url + "/"

    @property
    def seed_urls(self) -> list[str]:
        return self.seeds or [self.seed]


@contextlib.contextmanager
def serve_site(n_pages: int, workdir: Path, seed: int = 1, validators: bool = True) -> Iterator[ServedSite]:
    """Generate and serve the site; nginx when installed, else the project's demo_site server.
    ``validators=False``: nginx sends no ETag and ignores conditional requests."""
    if shutil.which("nginx") or Path("/usr/sbin/nginx").exists():
        site = StaticSite(n_pages, seed)
        root = workdir / "site"
        written = site.write(root)
        server = NginxServer(root, workdir / "nginx", server_extra="" if validators else NO_VALIDATORS).start()
        try:
            yield ServedSite(server.base_url, site.expected_urls(server.base_url), "nginx", server, written)
        finally:
            server.stop()
        return
    demo = DemoSite(n_pages=n_pages, seed=seed, links_per_page=LINKS_PER_PAGE)
    with SiteServer(demo) as fallback:
        expected = demo.expected_urls(fallback.base_url)
        yield ServedSite(fallback.base_url, expected, "demo_site (fallback: no nginx)", None)


def host_addresses(hosts: int) -> tuple[str, ...]:
    """`hosts` distinct loopback addresses: 127.0.1.1 ... 127.0.1.250, 127.0.2.1, ..."""
    if not 1 <= hosts <= 250 * 254:
        raise ValueError("between 1 and 63,500 hosts")
    return tuple(f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(hosts))


@contextlib.contextmanager
def serve_hosts(hosts: int, pages_per_host: int, workdir: Path, seed: int = 1) -> Iterator[ServedSite]:
    """The many-host site: one generated site of `pages_per_host` articles (plus its home page)
    served by nginx on `hosts` loopback addresses, each a host of its own. Needs nginx."""
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        raise RuntimeError("the many-host site needs nginx (apt-get install nginx-light)")
    site = StaticSite(pages_per_host, seed)
    root = workdir / "site"
    written = site.write(root)
    addresses = host_addresses(hosts)
    server = NginxServer(root, workdir / "nginx", addresses=addresses).start()
    try:
        bases = [f"http://{address}:{server.port}" for address in addresses]
        expected = set().union(*(site.expected_urls(base) for base in bases))
        yield ServedSite(server.base_url, expected, f"nginx on {hosts} loopback hosts", server, written,
                         seeds=[base + "/" for base in bases])
    finally:
        server.stop()


def measure_server_rate(url: str, seconds: int = 3) -> dict[str, float]:
    """Requests/s the server sustains for one page: `wrk` with 1 and with 16 keep-alive connections
    (bounded to `seconds` each), else a single-connection Python keep-alive loop."""
    wrk = shutil.which("wrk")
    if wrk:
        rates = {}
        for conns in (1, 16):
            out = subprocess.run([wrk, "-t1" if conns == 1 else "-t2", f"-c{conns}", f"-d{seconds}s", url],
                                 capture_output=True, text=True, timeout=seconds + 30, check=False).stdout
            m = re.search(r"Requests/sec:\s+([\d.]+)", out)
            rates[f"wrk_{conns}_conn_req_per_s"] = float(m.group(1)) if m else float("nan")
        return rates
    import http.client  # noqa: PLC0415

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    count, started = 0, time.monotonic()
    while time.monotonic() - started < seconds and count < 1_000_000:
        conn.request("GET", parts.path)
        conn.getresponse().read()
        count += 1
    conn.close()
    return {"python_1_conn_req_per_s": count / (time.monotonic() - started)}

