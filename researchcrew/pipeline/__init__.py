"""One question, from the guard to the answer: the research pipeline and its stages.

The sub-packages and modules are the stages, in the order a question meets them:

* ``guard`` — refuse empty, oversized or incoherent input politely;
* ``retrieve`` — ask every source at once, each under its timeout;
* ``evaluate/`` — score, deduplicate, filter and cross-check the evidence;
* ``evidence_gate`` — is the evidence enough to answer, or should the question be reformulated;
* ``reformulate`` — a new search query (deterministic, or with the LLM);
* ``synthesize/`` — the cited answer (LLM writer or extractive) and its citation check;
* ``remember/`` — conversation history, entities, relationships and preferences, after the answer went out;
* ``flow`` routes a question through them (a crewAI Flow); ``stages`` bundles them; ``assemble`` builds them
  from settings; ``responses`` are the answers given without synthesis (refusal, uncertainty).
"""
