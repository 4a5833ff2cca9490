"""The engine's command line (main) and the demo website that `up` serves and the tests crawl (demo_site)."""
