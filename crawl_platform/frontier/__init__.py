"""The frontier: every URL each crawl knows, its state, admitting new URLs within scope and caps,
publishing them to the bus, and the read model behind `status`.
"""
