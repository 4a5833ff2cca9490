"""The crawl store: connections to the database (database), its schema, versioned landing of a
batch (landing), the hosts table (hosts) and the Great Expectations suites over the tables (quality).
"""
