"""What a run saved, read and shown: nothing here runs a load.

* :mod:`mcpfast.results.files` - a run's saved files, written and read in one place.
* :mod:`mcpfast.results.report` - the summary table and text, and every PNG of a bench run again.
* :mod:`mcpfast.results.plots` - the PNG plots (matplotlib, extra ``bench``).
* :mod:`mcpfast.results.page` - ``report.html`` of a bench run or a capacity search (the page
  itself is drawn by :mod:`mcpfast.locust.report_page`, which a plain ``locust`` run uses too).
* :mod:`mcpfast.results.noise` and :mod:`mcpfast.results.compare` - ``mcpfast compare``: each
  percentile's change between two runs judged against the runs' own per-second noise.

The commands that run loads (:mod:`mcpfast.bench`) sit above this package; the swarm
(:mod:`mcpfast.locust`) below it.
"""
