"""Text analysis shared by every stage: the one sentence splitter (``sentences``), and the one stemmer and stop-word
list with what claims, passages and questions are compared by (``terms``)."""
