#!/usr/bin/env python3
"""Random teacher-forced sequences for bench/kl_vs_llama.sh on a checkpoint without a fixture.

    python3 bench/random_seqs.py N PROMPT CONT HIGH SEED > seqs.tsv

N lines "PROMPT_IDS<TAB>CONTINUATION_IDS", ids drawn uniformly from [0, HIGH) with
numpy.random.default_rng(SEED), the prompts first, then the continuations, line by line."""
import sys

import numpy as np


def main():
    n, prompt, cont, high, seed = (int(a) for a in sys.argv[1:6])
    rng = np.random.default_rng(seed)
    for _ in range(n):
        p = rng.integers(0, high, prompt)
        c = rng.integers(0, high, cont)
        print("%s\t%s" % (",".join(map(str, p)), ",".join(map(str, c))))


if __name__ == "__main__":
    main()
