-- The crawl store's tables in the DuckLake lake. Table and column names listed in docs/tables.md are
-- a contract. DuckLake enforces NOT NULL but no PRIMARY KEY or UNIQUE: the key of each table is noted
-- and kept by the code that writes it, under the lake's write lock (docs/tables.md).
CREATE TABLE IF NOT EXISTS crawls (
    crawl_id      VARCHAR NOT NULL,      -- key
    seeds         VARCHAR[] NOT NULL,
    scope         VARCHAR NOT NULL,      -- host | domain | any
    max_pages     INTEGER NOT NULL,
    max_depth     INTEGER NOT NULL,
    submitted_at  TIMESTAMP NOT NULL,
    registered_at TIMESTAMP NOT NULL,
    allow_patterns VARCHAR[],
    deny_patterns VARCHAR[],
    max_pages_per_host INTEGER,
    user_agent    VARCHAR,
    use_sitemaps  BOOLEAN,
    state         VARCHAR,               -- active | paused | cancelled (NULL: active); crawl-platform cancel|pause|resume
    state_changed_at TIMESTAMP,          -- issue time of the latest control command applied
    host_delay_ms INTEGER,               -- the crawl's own gap per host (0/NULL: CRAWL_HOST_DELAY_MS)
    host_concurrency INTEGER,            -- the crawl's requests in flight per host (0/NULL: CRAWL_HOST_CONCURRENCY)
    priority      INTEGER,               -- higher: its batches run first when the run queue is full
    extract_rules VARCHAR,               -- the crawl's extraction rules (canonical JSON); NULL: none
    render        VARCHAR,               -- never | always | auto (NULL: never); docs/rendering.md
    screenshots   BOOLEAN                -- a screenshot of each rendered page is archived
);
CREATE TABLE IF NOT EXISTS frontier (
    url           VARCHAR NOT NULL,
    crawl_id      VARCHAR NOT NULL,
    depth         INTEGER NOT NULL,
    state         VARCHAR NOT NULL,      -- discovered | queued | fetched | failed | disallowed | paused | cancelled
    discovered_at TIMESTAMP NOT NULL,
    host          VARCHAR NOT NULL,
    updated_at    TIMESTAMP NOT NULL,
    batch_id      VARCHAR                -- batch that fetched it
    -- key: (crawl_id, url)
);
CREATE TABLE IF NOT EXISTS pages (
    url           VARCHAR NOT NULL,
    crawl_id      VARCHAR NOT NULL,      -- crawl that produced this version
    version       INTEGER NOT NULL,      -- 1, 2, ... bumps only when content_hash changes
    status        INTEGER,               -- HTTP status; NULL when no response (error set)
    fetched_at    TIMESTAMP NOT NULL,
    content_hash  VARCHAR NOT NULL,      -- sha256 hex (64 chars) of status + body, or of the error
    content_type  VARCHAR,
    final_url     VARCHAR,               -- after redirects
    batch_id      VARCHAR NOT NULL,
    error         VARCHAR,               -- NULL on a response
    content_length BIGINT NOT NULL,
    elapsed_ms    DOUBLE NOT NULL,
    etag          VARCHAR,
    last_modified VARCHAR,
    redirect_chain VARCHAR[],
    charset       VARCHAR,
    warc_file     VARCHAR,               -- the version's WARC response record: file under the archive root,
    warc_offset   BIGINT,                -- its byte offset there and its length (one gzip member);
    warc_length   BIGINT,                -- NULL when there was no response or archiving was off
    rendered      BOOLEAN,               -- the page was rendered in a browser: its document is the rendered DOM
    render_reason VARCHAR,               -- why it was rendered, or (auto) why not; NULL: the crawl does not render
    render_error  VARCHAR,               -- why rendering failed (the document is then the HTTP body's)
    render_refused VARCHAR[],            -- requests of the page the network guard refused: 'URL: reason'
    render_warc_file   VARCHAR,          -- the rendered DOM's WARC conversion record (file, offset, length)
    render_warc_offset BIGINT,
    render_warc_length BIGINT
    -- key: (url, version)
);
CREATE TABLE IF NOT EXISTS documents (
    url     VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    title   VARCHAR,
    text    VARCHAR NOT NULL,
    main_text VARCHAR,                   -- without boilerplate; NULL when extraction failed (main_text_error)
    language  VARCHAR,                   -- ISO 639-1 of main_text; NULL without text or a confident guess
    simhash   UBIGINT,                   -- 64-bit SimHash of main_text; NULL without a word of it
    extractor VARCHAR,                   -- e.g. 'resiliparse 2.0.1'
    main_text_error VARCHAR,             -- why main_text is NULL
    parse_error VARCHAR,                 -- why the parser gave no title, text or links (NULL: it did)
    links_truncated BOOLEAN              -- the page had more links than CRAWL_MAX_LINKS_PER_PAGE: the first are in links
    -- key: (url, version)
);
CREATE TABLE IF NOT EXISTS links (
    src_url     VARCHAR NOT NULL,
    src_version INTEGER NOT NULL,
    dst_url     VARCHAR NOT NULL,        -- canonical absolute URL
    anchor_text VARCHAR NOT NULL,
    batch_id    VARCHAR                  -- the batch that landed the page version (its pages.batch_id): admission reads
                                         -- a batch's links by it; NULL in rows landed before the lake had this column
);
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id VARCHAR NOT NULL,
    crawl_id VARCHAR NOT NULL,
    url      VARCHAR NOT NULL,
    depth    INTEGER NOT NULL,
    outcome  VARCHAR NOT NULL            -- fetched | failed | disallowed | skipped | postponed
    -- key: (batch_id, crawl_id, url)
);
-- Per-origin state shared by all runs: robots.txt cache and adaptive politeness.
CREATE TABLE IF NOT EXISTS hosts (
    origin            VARCHAR NOT NULL,      -- key; scheme://host[:port] (frontier.host is the netloc alone)
    robots_status     INTEGER,               -- HTTP status of robots.txt; NULL = network error
    robots_body       VARCHAR,
    robots_fetched_at TIMESTAMP,
    delay_ms          INTEGER,               -- current adaptive gap between requests
    updated_at        TIMESTAMP NOT NULL,
    render_needed     BOOLEAN                -- a page of it needed JavaScript rendering: crawls that render
                                             -- auto render its pages from then on
);
-- Batches whose page events the broker confirmed (crawl_platform.pipeline.page_events): a landed
-- batch missing here has its events published again.
CREATE TABLE IF NOT EXISTS page_event_batches (
    batch_id     VARCHAR NOT NULL,           -- key
    events       INTEGER NOT NULL,
    published_at TIMESTAMP NOT NULL
);
-- The frontier offset ranges of each landed batch, written in its landing transaction: a batch
-- run that goes on to its partitions' next link level cuts those ranges itself, and the frontier
-- sensor moves its cursor past what landed (crawl_platform.pipeline.continuation).
CREATE TABLE IF NOT EXISTS batch_ranges (
    batch_id     VARCHAR NOT NULL,           -- the batch's partition key
    epoch        INTEGER NOT NULL,           -- the key's epoch (it goes up when the broker lost its log)
    "partition"  INTEGER NOT NULL,           -- frontier topic partition
    start_offset BIGINT NOT NULL,
    end_offset   BIGINT NOT NULL             -- exclusive
);
-- Per-crawl schedules: a crawl family (the id before any '@') is crawled again on this schedule.
CREATE TABLE IF NOT EXISTS crawl_schedules (
    crawl_id       VARCHAR NOT NULL,     -- key; the family's base id
    every_seconds  INTEGER,              -- a fixed interval, or NULL with cron
    cron           VARCHAR,              -- a 5-field cron expression (UTC), or NULL with every_seconds
    period_seconds INTEGER NOT NULL,     -- the interval, or the gap between two cron ticks
    active         BOOLEAN NOT NULL,     -- false after `schedule --off`
    updated_at     TIMESTAMP NOT NULL
);
-- Adaptive revisits: per crawl family and URL, how often it is fetched again (docs/recurring.md).
CREATE TABLE IF NOT EXISTS revisits (
    crawl_id         VARCHAR NOT NULL,   -- the family's base id
    url              VARCHAR NOT NULL,   -- key: (crawl_id, url)
    depth            INTEGER NOT NULL,   -- the depth a pass admits it at
    interval_seconds DOUBLE NOT NULL,    -- the revisit interval, between the minimum and the maximum
    checked_at       TIMESTAMP NOT NULL, -- start of the pass that last fetched it
    next_due_at      TIMESTAMP NOT NULL, -- checked_at + interval: passes from then on fetch it
    changes          INTEGER NOT NULL    -- fetches that found new content
);
-- Records extracted from the raw archive by each crawl's extraction rules (crawl_platform.extract);
-- a typed view records_<crawl> per crawl has one real column per field.
CREATE TABLE IF NOT EXISTS records (
    crawl_id     VARCHAR NOT NULL,
    rules_digest VARCHAR NOT NULL,       -- which rules made it (16 hex digits of their sha256)
    url          VARCHAR NOT NULL,
    version      INTEGER NOT NULL,       -- the pages version it comes from
    record_index INTEGER NOT NULL,       -- 0, 1, ... in page order (one per `base` match)
    fields       JSON NOT NULL,          -- field -> value; null when missing or failing its type
    errors       JSON NOT NULL,          -- field -> "missing: ..." | "regex: ..." | "type: ..."; {} when clean
    extracted_at TIMESTAMP NOT NULL
    -- key: (crawl_id, url, version, record_index)
);
-- One row per page version the rules were applied to: how many records it gave, or why none.
CREATE TABLE IF NOT EXISTS record_pages (
    crawl_id     VARCHAR NOT NULL,
    rules_digest VARCHAR NOT NULL,
    url          VARCHAR NOT NULL,
    version      INTEGER NOT NULL,
    records      INTEGER NOT NULL,
    error        VARCHAR,                -- not HTML, no document, base matched nothing, ...; NULL when fine
    extracted_at TIMESTAMP NOT NULL
    -- key: (crawl_id, url, version)
);
-- Groups of a crawl's latest document versions that are copies of each other (asset near_duplicates).
CREATE TABLE IF NOT EXISTS near_duplicates (
    crawl_id       VARCHAR NOT NULL,
    group_id       INTEGER NOT NULL,     -- 1, 2, ... within the crawl, in the order of the representatives' URLs
    url            VARCHAR NOT NULL,
    version        INTEGER NOT NULL,     -- the pages/documents version grouped
    representative VARCHAR NOT NULL,     -- the group's shortest URL (then the first in order)
    kind           VARCHAR NOT NULL,     -- exact (same content_hash as the representative) | near
    distance       INTEGER               -- Hamming distance of its simhash to the representative's; NULL without one
    -- key: (crawl_id, url)
);
-- Each HTML page version as Markdown with its published date, extracted from the archive (asset documents_markdown).
CREATE TABLE IF NOT EXISTS documents_markdown (
    url            VARCHAR NOT NULL,
    version        INTEGER NOT NULL,
    markdown       VARCHAR,              -- trafilatura's main content as Markdown; NULL: none found or failed (error)
    published_date DATE,                 -- htmldate's original publication date; NULL when none is found
    extractor      VARCHAR NOT NULL,     -- e.g. 'trafilatura 2.3.1; htmldate 1.11.0'
    error          VARCHAR               -- why markdown is NULL
    -- key: (url, version)
);
