#!/usr/bin/env python3
"""Reference values for rig's analysis exact tests, from SciPy and
statsmodels (implementations that are not ours).

Run:  python3 -m venv /tmp/scipyvenv && /tmp/scipyvenv/bin/pip install scipy statsmodels
      /tmp/scipyvenv/bin/python testdata/make_reference.py > testdata/reference.json
"""
import json
import sys

import numpy as np
import scipy
import statsmodels
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

binomial = []
for k, n, p in [(0, 1, 0.5), (3, 10, 0.5), (7, 10, 0.5), (5, 10, 0.5), (0, 20, 0.5),
                (12, 40, 0.5), (60, 100, 0.5), (33, 100, 0.5), (2, 15, 0.3),
                (9, 15, 0.3), (4, 50, 0.1), (13, 50, 0.1), (250, 1000, 0.2),
                (180, 1000, 0.2), (0, 5, 0.9), (17, 30, 0.65), (480, 1000, 0.5)]:
    binomial.append({"k": k, "n": n, "p": p,
                     "pvalue": float(stats.binomtest(k, n, p, alternative="two-sided").pvalue)})

mcn = []
for b, c in [(0, 0), (0, 1), (1, 0), (3, 4), (0, 6), (2, 12), (10, 25), (40, 22),
             (100, 70), (5, 5), (1, 9), (150, 220), (0, 30)]:
    if b + c == 0:
        continue
    r = mcnemar([[10, b], [c, 10]], exact=True)
    mid = None
    # mid-p: 2*(P(X<=min) - 0.5*P(X=min)), capped at 1
    lo = min(b, c)
    mid = min(1.0, 2 * (stats.binom.cdf(lo, b + c, 0.5) - 0.5 * stats.binom.pmf(lo, b + c, 0.5)))
    mcn.append({"b": b, "c": c, "pvalue": float(r.pvalue),
                "binomtest": float(stats.binomtest(b, b + c, 0.5).pvalue),
                "midp": float(mid)})

holm = []
for ps in [[0.01, 0.04, 0.03, 0.005], [0.5], [0.001, 0.001, 0.2, 0.04, 0.049, 0.9, 0.011],
           [0.02, 0.02, 0.02], [1e-6, 0.3, 0.012, 0.0125, 0.6, 0.02, 0.04, 0.05]]:
    holm.append({"p": ps, "adjusted": [float(x) for x in multipletests(ps, method="holm")[1]]})

signflip = []
rng = np.random.default_rng(7)
cases = [[0.5, 0.25, -0.125, 0.75, 0.5, 0.0, 1.0],
         [1, -1, 1, 1, 1, 1, -1, 1, 1, 1],
         [0.1, 0.2, 0.3, -0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 0.15, 0.25, 0.35]]
cases.append([float(x) for x in np.round(rng.normal(0.1, 0.3, 14), 3)])
for d in cases:
    d = np.asarray(d, dtype=float)
    res = stats.permutation_test((d, np.zeros_like(d)), lambda x, y: np.sum(x - y),
                                 permutation_type="samples", alternative="two-sided",
                                 n_resamples=np.inf, vectorized=False)
    signflip.append({"d": d.tolist(), "pvalue": float(res.pvalue)})

# Exact McNemar power by brute force over every (b, c) with the trinomial
# probability and SciPy's binomtest as the test.
power = []
for n, psi, delta, alpha in [(30, 0.4, 0.2, 0.05), (60, 0.3, 0.15, 0.05 / 3), (100, 0.25, 0.1, 0.05 / 7)]:
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    tot = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if b <= c:
                continue
            if stats.binomtest(b, b + c, 0.5).pvalue <= alpha:
                tot += stats.multinomial.pmf([b, c, n - b - c], n, [p10, p01, 1 - psi])
    power.append({"n": n, "psi": psi, "delta": delta, "alpha": alpha, "power": float(tot)})

json.dump({"generator": "testdata/make_reference.py",
           "scipy": scipy.__version__, "statsmodels": statsmodels.__version__,
           "binomial": binomial, "mcnemar": mcn, "holm": holm,
           "signflip": signflip, "power": power}, sys.stdout, indent=1)
sys.stdout.write("\n")
