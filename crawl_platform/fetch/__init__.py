"""Fetching politely: the fetcher and its HTTP transport, deadlines, the network guard, proxies,
retries, robots.txt, sitemaps, and per-host politeness (the pacer and the turns workers take).
It reads nothing from the store: a batch primes it with what earlier runs learned.
"""
