"""The Dagster layer of crawl-platform, installed under one name that cannot clash.

Its code lives in the project's top-level folders ``assets/``, ``sensors/`` and ``resources/``
(the project's required shape), which ``pyproject.toml`` installs as the subpackages
``crawl_platform_dagster.assets``, ``.sensors`` and ``.resources``, so no generic top-level
module lands in a user's site-packages. This folder holds what ties them together:
``definitions`` (the ``Definitions`` that ``workspace.yaml`` loads), ``instance`` (what the Dagster
instance must know: run tags, pools, executor config), ``stack`` (``crawl-platform up`` and
``worker``) and ``cli`` (the installed ``crawl-platform`` script).
"""
