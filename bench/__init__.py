"""`python -m rag bench`: speed and memory figures for ingest, retrieval, generation and start-up.

Figures are medians over repeats, printed and written as JSON + markdown to bench/results/ (git-ignored); the
committed bench/RESULTS.md quotes one run with its command. Nothing here is asserted as a time in a test.
"""
