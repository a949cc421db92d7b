"""The search domain: BM25 over the documentation strings of Python's standard
library; actions are search and open tool calls.

  env.py        the corpus, the index and the recorder (SearchEnvironment)
  playbooks.py  look-ups of a target document, with vague and misspelled queries
"""
