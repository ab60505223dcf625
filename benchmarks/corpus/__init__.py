"""The benchmark corpus: decoding graphs built from a real trigram LM and simulated CTC log-probs.

Modules, in the order a build runs them:

- `arpa`: read, prune (keeping the ARPA consistent) and write n-gram LMs; sample text from them.
- `units`: the sentencepiece BPE-500 model, tokens.txt, words.txt and lexicon.txt (icefall layout).
- `fstio`: OpenFst binary VectorFst <-> numpy arrays, so big graphs never go through Python loops.
- `lang`: L (lexicon with disambiguation symbols), G (kaldilm) and LG = minimize(determinize(L o G)).
- `rmeps`: input-epsilon removal of LG with word labels, k2's closure algorithm.
- `topo`: the CTC topology (H for HLG, Riva's T for TLG).
- `build`: the CLI, `python -m benchmarks.corpus.build --tier {tiny,small,full} --out DIR`.
- `simulate`: peaky CTC log-probs for LM-sampled references, and `evaluate`: greedy vs HLG WER.
"""
