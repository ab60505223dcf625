"""Benchmark tooling for cuwfst: the corpus (graphs and simulated CTC log-probs), peers, the driver."""
