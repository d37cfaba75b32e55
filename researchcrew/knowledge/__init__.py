"""The knowledge base: ingestion, chunking, embedding, the Milvus collection and its search."""
