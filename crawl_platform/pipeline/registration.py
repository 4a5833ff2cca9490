"""Registering a crawl: the one path by which a crawl comes to exist.

Every entry registers a crawl request through :func:`register_crawl`: the CLI right after it put
the request on the seeds topic (:func:`register_now`), and
:class:`~crawl_platform.pipeline.intake.SeedIntake` for each request of a seeds-topic range (the
seeds sensor in its own evaluation, the ``crawls`` asset in an intake run, the in-process
:class:`~crawl_platform.pipeline.loop.CrawlLoop`). The lake's ``crawls`` table is the record of
which crawls exist: only :meth:`~crawl_platform.frontier.frontier.Frontier.register` writes it,
under the lake's write lock, and registering is idempotent per crawl id, so the entry that takes a
request after another one registered it adds nothing. The readers ask the lake
(:class:`~crawl_platform.frontier.read_model.FrontierReadModel`,
:func:`~crawl_platform.pipeline.submission.registration_conflict`). No fetcher is imported here, so
the CLI stays light; the intake lends its own to read sitemaps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crawl_platform.bus.base import Bus
from crawl_platform.bus.messages import CrawlRequest
from crawl_platform.frontier.admission import RegistrationConflictError
from crawl_platform.frontier.frontier import Frontier
from crawl_platform.pipeline.submission import OUT_OF_REACH
from crawl_platform.store.database import CrawlStore
from crawl_platform.store.errors import one_line

SitemapURLs = Callable[[CrawlRequest], list[str]]
"""The in-scope URLs of a crawl's seed hosts' sitemaps (none when it reads no sitemaps)."""


@dataclass(frozen=True)
class Registered:
    """A crawl registered: URLs admitted into its frontier (seeds, sitemaps' URLs), and published."""

    crawl_id: str
    admitted: int
    published: int


def register_crawl(frontier: Frontier, request: CrawlRequest, sitemap_urls: SitemapURLs | None = None) -> Registered:
    """Register the crawl ``request`` asks for and put its seeds on the frontier topic, with the
    URLs ``sitemap_urls`` finds for it, admitted at depth 1 (up to its ``max_pages``); idempotent
    per crawl id. Raises :class:`~crawl_platform.frontier.admission.RegistrationConflictError` when
    the id is registered with other options (or is a pass not of its family), and one of
    ``OUT_OF_REACH`` when the lake or the broker is out of reach."""
    from_sitemaps: list[str] = []
    if sitemap_urls is not None and request.use_sitemaps:
        conflict = frontier.admission.conflict(request)  # before the network work, not after it
        if conflict is not None:
            raise RegistrationConflictError(conflict)
        # Sitemaps first, before the seeds are published: a batch run fetching the host meanwhile
        # would not know of these requests and ignore the host's delay.
        from_sitemaps = sitemap_urls(request)
    growth = frontier.register(request)
    admitted, published = growth.admitted, growth.published
    if from_sitemaps:
        more = frontier.admit(request.crawl_id, from_sitemaps, depth=1)
        admitted, published = admitted + more.admitted, published + more.published
    return Registered(request.crawl_id, admitted, published)


def register_now(store: CrawlStore, bus: Bus, request: CrawlRequest) -> str | None:
    """Register a crawl just submitted to the seeds topic at once, so its first batch need not wait
    for the seeds sensor; the sensor then finds it registered and adds nothing. Returns None when
    done, else one line saying why not: the lake or the broker is not reachable from here, or the
    crawl reads sitemaps (their URLs come with its intake run, and until then the crawl would look
    finished once its seeds are fetched). The seeds sensor or that run registers it then. Raises
    :class:`~crawl_platform.frontier.admission.RegistrationConflictError` as :func:`register_crawl` does."""
    if request.use_sitemaps:
        return "it reads sitemaps, which the intake run fetches"
    try:
        register_crawl(Frontier(store, bus), request)
    except OUT_OF_REACH as err:
        return one_line(str(err)) or type(err).__name__
    return None
