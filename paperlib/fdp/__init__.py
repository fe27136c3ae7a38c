"""f-DP primitives: trade-off functions and their evaluation (numpy and scipy only).

Trade-off curves (:mod:`.tradeoff`), the Gaussian building blocks (:mod:`.gaussian`),
likelihood-ratio mixtures (:mod:`.mixture`), chi-square numerics and privacy-loss
composition (:mod:`.composition`), and the CLT bounds (:mod:`.clt`). Nothing here knows
about DP-SGD mechanisms, audits or the book; importing it never imports torch or
matplotlib (a test checks this).
"""
