"""The frontier: every URL each crawl knows, its state, admitting new URLs within scope and caps,
publishing them to the bus, and the read model behind `status`.

Modules: ``states`` (URL and crawl states and their transitions), ``state_store`` (writes to the
``frontier`` table), ``admission`` (which URLs enter a crawl), ``publisher`` (the bus),
``read_model`` (status, no bus), ``control`` (cancel, pause, resume a crawl) and ``frontier`` (the
:class:`Frontier` facade over them).
"""
