"""Word lists the rule-based entity extractor (``_entities.py``) relies on.

They are small on purpose: they keep sentence-start and heading capitalisation from producing junk entities, and
they type well-known names (metrics, model families, datasets, organisations) that the surrounding words do not
type. They never decide on their own that something IS an entity: shape and position do that.
"""

from __future__ import annotations

from researchcrew.text.terms import STOP_WORDS


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that are capitalised at the start of a sentence or in a heading but are no evidence of a name. A run made
# only of them is dropped; one of them opening a sentence is stripped from the run. (The shared function words,
# ``text.terms.STOP_WORDS``, are stripped from either end of a run: "The BERT", "In Dense Retrieval".)
COMMON = STOP_WORDS | _words("""
also although another any anyway are as based because before after being both but can could did do does done
each either else even every first second third finally furthermore further generally given hence here however
indeed instead is it's just last later let many may meanwhile might more moreover most much must neither never
next no nor not now often once one only other otherwise overall perhaps rather recent recently several shall
should similarly since some still such thus therefore though today together too two three four five unlike
unless until usually was were whereas whether will would yes yet you yours see note notes consider compare
compared according answer answers question questions summary summaries overview introduction background
conclusion conclusions result results finding findings key main related work works discussion limitations
limitation details detail example examples evidence sources source references reference section sections step
steps part parts table figure appendix important caveat caveats confidence definition definitions use using used
new old good best better high higher low lower large larger small smaller many few other others all none both
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
september october november december there their they these this those what which who why how where when
unfortunately interestingly importantly notably specifically essentially basically additionally alternatively
traditionally typically ultimately initially originally currently previously similarly likewise conversely
hello hi thanks thank please sure okay ok
""")

NAME_CONNECTORS = frozenset({"of", "for", "de", "van", "von", "der", "den", "la", "le", "du", "del", "da", "di"})

# Small words an acronym's letters skip ("Bank of America (BoA)").
DEFINITION_SKIP = _words("of for and the a an in on to from with by via")

# All-caps tokens that are ordinary words, Roman numerals or shorthand rather than names.
NOT_ACRONYMS = _words("""
I A OK AND OR NOT THE NB II III IV VI VII VIII IX XI XII XIII XIV XV TODO NOTE FYI ETC VS AM PM ID IDS FAQ TL DR
TLDR ASAP PS IS IT OF TO IN ON AT BY AN AS BE DO GO IF NO SO UP WE MY ME HE YES OKAY PDF URL URLS HTML HTTP HTTPS
JSON API APIS CSV EOF QA Q DOI DOIS ISBN ISSN
""")

PERSON_CUES = _words("by dr prof professor author authors researcher researchers mr ms mrs sir")
# Verbs that follow a person's name in research prose ("Hinton proposed", "Lewis et al. introduced").
PERSON_VERBS = _words("""
proposed introduced showed shows argued argues wrote developed coined found demonstrated described invented
suggested published received won said says noted observed popularized pioneered co-authored authored
""")

CONTEXT_TYPES: dict[str, str] = {
    **dict.fromkeys(("dataset", "datasets", "corpus", "corpora", "benchmark", "benchmarks", "collection"), "dataset"),
    **dict.fromkeys(("model", "models", "architecture", "encoder", "decoder", "checkpoint", "llm", "network"), "model"),
    **dict.fromkeys(("method", "methods", "approach", "technique", "algorithm", "framework", "paradigm"), "method"),
    **dict.fromkeys(("metric", "metrics", "score", "scores"), "metric"),
}

METRICS = _words(
    "NDCG MRR MAP BLEU ROUGE METEOR AUC AUROC F1 EM PPL WER CER CIDER SPICE BERTSCORE MAE MSE RMSE ACC "
    "RECALL@K P@K HITS@K"
)

MODEL_FAMILIES = _words("""
BERT GPT T5 BART ROBERTA XLNET ELECTRA ALBERT DEBERTA LLAMA MISTRAL MIXTRAL GEMMA PALM FALCON CLIP VIT RESNET VGG
LSTM GRU COLBERT SPLADE OPT BLOOM QWEN PHI CLAUDE GEMINI WORD2VEC GLOVE ELMO FLAN
""")
MODEL_SUFFIXES = ("BERT", "GPT", "NET", "FORMER")
METHOD_NAMES = _words(
    "BM25 TF-IDF TFIDF RLHF DPO PPO LORA QLORA PEFT SGD ADAM ADAMW PCA SVM KNN HNSW RRF MMR RAG DPR COT ICL SFT MLM NSP"
)

ORG_WORDS = _words("""
university universität université institute institution laboratory laboratories lab labs inc corp corporation
company foundation consortium association society academy college school department google microsoft openai
deepmind meta facebook amazon apple ibm nvidia anthropic baidu alibaba tencent huawei
""")

DATASET_WORDS = _words("""
dataset datasets corpus corpora benchmark treebank squad glue superglue marco fever hotpotqa triviaqa imagenet
coco mnist cifar wikitext beir mmlu scifact
""")

MODEL_WORDS = _words("model models network networks transformer transformers encoder decoder net")

METHOD_WORDS = _words("""
retrieval generation learning attention embedding embeddings search augmentation augmented tuning distillation
training pretraining reranking ranking classification regression optimization descent inference verification
answering propagation sampling decoding tokenization prompting reasoning alignment summarization translation
clustering indexing quantization pruning regularization normalization dropout encoding modeling modelling
detection segmentation recognition extraction matching hashing fusion
""")

ARXIV_ARCHIVES = _words("""
astro-ph cond-mat gr-qc hep-ex hep-lat hep-ph hep-th math-ph nlin nucl-ex nucl-th physics quant-ph math cs q-bio
q-fin stat eess econ chao-dyn solv-int patt-sol adap-org comp-gas cmp-lg alg-geom dg-ga funct-an q-alg mtrl-th
supr-con chem-ph atom-ph plasm-ph ao-sci acc-phys bayes-an
""")

# Long all-caps names that are names all the same (other all-caps words over six letters are emphasis or labels).
KNOWN_CAPS = METRICS | MODEL_FAMILIES | METHOD_NAMES | frozenset(w.upper() for w in DATASET_WORDS)
