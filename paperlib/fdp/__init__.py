"""f-DP primitives: trade-off functions and their evaluation (numpy and scipy only).

Trade-off curves and the trade-off interface (:mod:`.tradeoff`: ``TradeOff``,
``TradeOffCurve``, ``GaussianTradeOff``, ``from_dict``, ``check_tradeoff``), the Gaussian
building blocks (:mod:`.gaussian`), likelihood-ratio mixtures (:mod:`.mixture`), log-space
tail probabilities of the chi-square laws (:mod:`.tails`), the exact chi-square pairs
(:mod:`.chisquare`), privacy-loss composition (:mod:`.pld`), and the CLT bounds (:mod:`.clt`). Every
curve type is a ``TradeOff``: ``f(alpha)``, ``f.curve(tol)``, ``f.delta(eps)``,
``f.epsilon(delta)``, ``f.inverse()``, ``f.symmetrised()``, ``f.to_dict()`` /
``from_dict(d)``. Nothing here knows about DP-SGD mechanisms, audits or the book;
importing it never imports torch or matplotlib (a test checks this).
"""
