#!/usr/bin/python3
"""Quantization quality as the field measures it: per-row KL(P_ref || P_test) and top-1 agreement
of next-token distributions over the same token sequences (teacher-forced logit dumps).

    python3 bench/kl_compare.py VOCAB REF.f32 NAME=TEST.f32 [NAME=TEST.f32 ...]

Every file is float32 [rows, VOCAB] in the same row order (qhx logits --out, or the libllama dumper
of the comparison set-up). Prints, per test: rows, KL mean / p99 / p99.9 / max in nats (exact
quantiles, float64 log-softmax), and the fraction of rows whose argmax equals the reference's
(lowest id on ties, as qhx --greedy). Exit 1 on a shape mismatch or a non-finite logit."""
import sys

import numpy as np


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def load(path, vocab):
    a = np.fromfile(path, dtype=np.float32)
    if a.size % vocab:
        sys.exit("%s: %d floats is not a whole number of %d-wide rows" % (path, a.size, vocab))
    a = a.reshape(-1, vocab)
    if not np.isfinite(a).all():
        sys.exit("%s: non-finite logits" % path)
    return a


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    vocab = int(sys.argv[1])
    ref = load(sys.argv[2], vocab)
    lp = log_softmax(ref)
    top_ref = ref.argmax(axis=1)
    print("%-14s %6s %10s %10s %10s %10s %8s" % ("test", "rows", "KL mean", "KL p99", "KL p99.9", "KL max", "top-1"))
    for spec in sys.argv[3:]:
        name, _, path = spec.partition("=")
        test = load(path, vocab)
        if test.shape != ref.shape:
            sys.exit("%s: shape %s, reference %s" % (path, test.shape, ref.shape))
        kl = np.maximum((np.exp(lp) * (lp - log_softmax(test))).sum(axis=1), 0.0)
        agree = float((test.argmax(axis=1) == top_ref).mean())
        print("%-14s %6d %10.3e %10.3e %10.3e %10.3e %8.4f" % (name, len(kl), kl.mean(), np.quantile(kl, 0.99),
                                                               np.quantile(kl, 0.999), kl.max(), agree))


if __name__ == "__main__":
    main()
