"""The four stages: Retriever, Evaluator, Synthesizer and Memory agents."""
