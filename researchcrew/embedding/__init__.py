"""Sentence embeddings (all-MiniLM-L6-v2, int8 ONNX by default), shared by the knowledge base and memory recall.

``embedder.get_embedder(settings)`` returns the process-wide model; ``onnx*`` convert and run it on ONNX Runtime;
``cpu`` says what the CPU offers for int8 arithmetic.
"""
