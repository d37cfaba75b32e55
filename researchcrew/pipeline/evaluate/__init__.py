"""The Evaluator stage: quality scores, near-duplicate removal, filtering and contradiction detection."""
