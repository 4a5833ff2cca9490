"""The crawl pipeline: submitting crawls (submission), seed intake (intake), one batch end to end
(batch), recrawl plans (recrawl) and the loop that decides what runs next (loop).
"""
