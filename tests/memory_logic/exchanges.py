"""Realistic research exchanges (question, answer with citation markers) for the entity-graph tests."""

from __future__ import annotations

RAG = (
    "What is Retrieval-Augmented Generation and how does it differ from fine-tuning?",
    "## Overview\n"
    "Retrieval-Augmented Generation (RAG) was introduced by Lewis et al. (2020) in arXiv:2005.11401 [1]. "
    "It combines a Dense Passage Retrieval (DPR) retriever with a BART generator, so the model can draw on "
    "passages from Wikipedia at inference time [1][2].\n\n"
    "**However**, unlike fine-tuning, RAG updates its knowledge by re-indexing documents rather than retraining. "
    "On Natural Questions, RAG outperformed a closed-book T5 baseline [2].",
)

BERT = (
    "How was BERT pre-trained?",
    "BERT (Bidirectional Encoder Representations from Transformers) was proposed by Jacob Devlin and colleagues "
    "at Google AI Language in 2018 [1]. It is pre-trained with masked language modeling (MLM) and next sentence "
    "prediction on BooksCorpus and English Wikipedia [1]. RoBERTa later removed next sentence prediction and "
    "trained longer, improving results on GLUE and SQuAD [2]. The paper's DOI is 10.18653/v1/N19-1423.",
)

SCIFACT = (
    "What does the SciFact dataset contain, and how are systems evaluated on it?",
    "SciFact is a dataset of 1,409 expert-written scientific claims paired with evidence-containing abstracts, "
    "released by the Allen Institute for AI [1]. Systems such as VeriSci retrieve abstracts, select rationale "
    "sentences and predict SUPPORTS or REFUTES labels [1].\n"
    "- In the BEIR benchmark, SciFact is used for zero-shot retrieval and scored with NDCG@10.\n"
    "- BM25 remains a strong baseline there [2].",
)

DENSE = (
    "Is dense retrieval better than BM25 on out-of-domain data?",
    "Not always. Thakur et al. showed in the BEIR benchmark (arXiv:2104.08663) that BM25 is a robust zero-shot "
    "baseline and that dense retrievers like DPR often underperform it out of domain [1]. Late-interaction models "
    "such as ColBERT and learned sparse models like SPLADE close much of the gap [1][2]. Hybrid retrieval that "
    "fuses BM25 and dense scores with Reciprocal Rank Fusion (RRF) is a common compromise [2].",
)

ALL = {"rag": RAG, "bert": BERT, "scifact": SCIFACT, "dense": DENSE}
