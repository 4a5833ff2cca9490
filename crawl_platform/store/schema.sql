-- The crawl store's tables in the DuckLake lake. Table and column names listed in the README are a
-- contract. DuckLake enforces NOT NULL but no PRIMARY KEY or UNIQUE: the key of each table is noted
-- and kept by the code that writes it, under the lake's write lock (see the README).
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
    use_sitemaps  BOOLEAN
);
CREATE TABLE IF NOT EXISTS frontier (
    url           VARCHAR NOT NULL,
    crawl_id      VARCHAR NOT NULL,
    depth         INTEGER NOT NULL,
    state         VARCHAR NOT NULL,      -- discovered | queued | fetched | failed | disallowed
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
    warc_length   BIGINT                 -- NULL when there was no response or archiving was off
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
    main_text_error VARCHAR              -- why main_text is NULL
    -- key: (url, version)
);
CREATE TABLE IF NOT EXISTS links (
    src_url     VARCHAR NOT NULL,
    src_version INTEGER NOT NULL,
    dst_url     VARCHAR NOT NULL,        -- canonical absolute URL
    anchor_text VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id VARCHAR NOT NULL,
    crawl_id VARCHAR NOT NULL,
    url      VARCHAR NOT NULL,
    depth    INTEGER NOT NULL,
    outcome  VARCHAR NOT NULL            -- fetched | failed | disallowed | skipped
    -- key: (batch_id, crawl_id, url)
);
-- Per-origin state shared by all runs: robots.txt cache and adaptive politeness.
CREATE TABLE IF NOT EXISTS hosts (
    origin            VARCHAR NOT NULL,      -- key; scheme://host[:port] (frontier.host is the netloc alone)
    robots_status     INTEGER,               -- HTTP status of robots.txt; NULL = network error
    robots_body       VARCHAR,
    robots_fetched_at TIMESTAMP,
    delay_ms          INTEGER,               -- current adaptive gap between requests
    updated_at        TIMESTAMP NOT NULL
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
