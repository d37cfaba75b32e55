"""The Synthesizer stage: a cited answer from the filtered evidence (LLM writer or extractive), citations
checked in code, confidence and coverage."""
