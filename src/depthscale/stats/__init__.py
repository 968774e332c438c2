"""Statistics, a leaf of pure functions on numbers and run rows (numpy and scipy only):

* :mod:`~depthscale.stats.fits`: every fit (power laws plain and weighted with CIs, error laws
  a/L + b g(n) with bootstrap CIs, the refined minimiser of a curve on a log grid);
* :mod:`~depthscale.stats.sweeps`: sweep analysis (eta* per size, seed summaries, the power law
  of eta* with its CIs, grid signals, scans of another axis; laws Sec. 4.1, nfd Fig. 2, 5);
* :mod:`~depthscale.stats.findings`: every verdict rule (interval and sign findings, routes,
  the noise gate).

Studies, probes, claims and the CLI import it; it imports nothing of theirs.
"""
