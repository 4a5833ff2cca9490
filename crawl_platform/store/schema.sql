-- DuckDB schema of the crawl store. Table and column names listed in the README are a contract.
CREATE TABLE IF NOT EXISTS crawls (
    crawl_id      VARCHAR PRIMARY KEY,
    seeds         VARCHAR[] NOT NULL,
    scope         VARCHAR NOT NULL,      -- host | domain | any
    max_pages     INTEGER NOT NULL,
    max_depth     INTEGER NOT NULL,
    submitted_at  TIMESTAMP NOT NULL,
    registered_at TIMESTAMP NOT NULL
);
CREATE TABLE IF NOT EXISTS frontier (
    url           VARCHAR NOT NULL,
    crawl_id      VARCHAR NOT NULL,
    depth         INTEGER NOT NULL,
    state         VARCHAR NOT NULL,      -- discovered | queued | fetched | failed | disallowed
    discovered_at TIMESTAMP NOT NULL,
    host          VARCHAR NOT NULL,
    updated_at    TIMESTAMP NOT NULL,
    batch_id      VARCHAR,               -- batch that fetched it
    PRIMARY KEY (crawl_id, url)
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
    PRIMARY KEY (url, version)
);
CREATE TABLE IF NOT EXISTS documents (
    url     VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    title   VARCHAR,
    text    VARCHAR NOT NULL,
    PRIMARY KEY (url, version)
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
    outcome  VARCHAR NOT NULL,           -- fetched | failed | disallowed | skipped
    PRIMARY KEY (batch_id, crawl_id, url)
);
-- Per-origin state shared by all runs: robots.txt cache and adaptive politeness.
CREATE TABLE IF NOT EXISTS hosts (
    origin            VARCHAR PRIMARY KEY,   -- scheme://host[:port] (frontier.host is the netloc alone)
    robots_status     INTEGER,               -- HTTP status of robots.txt; NULL = network error
    robots_body       VARCHAR,
    robots_fetched_at TIMESTAMP,
    delay_ms          INTEGER,               -- current adaptive gap between requests
    updated_at        TIMESTAMP NOT NULL
);
-- Columns added after the first release (existing files are migrated in place).
ALTER TABLE pages ADD COLUMN IF NOT EXISTS etag VARCHAR;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS last_modified VARCHAR;
ALTER TABLE pages ADD COLUMN IF NOT EXISTS redirect_chain VARCHAR[];
ALTER TABLE pages ADD COLUMN IF NOT EXISTS charset VARCHAR;
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS allow_patterns VARCHAR[];
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS deny_patterns VARCHAR[];
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS max_pages_per_host INTEGER;
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS user_agent VARCHAR;
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS use_sitemaps BOOLEAN;
