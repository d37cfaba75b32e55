"""Deep research (issue 14, seed 002): one run per question too broad for one pass.

Modules, by phase:

* ``flow`` — the crewAI Flow and its state: probe → clarify ⏸ → plan ⏸ → research → report → quality check;
* ``plan`` — the plan proposed (by the LLM, or by rule) and the user's decision applied;
* ``research`` — one sub-question through the normal pipeline;
* ``references`` / ``follow`` — references found in the evidence, resolved, scored and kept or not;
* ``report`` / ``quality`` — one report from the sub-question answers, its scores, and the one remediation retry;
* ``shape`` / ``shape_plan`` — the report's length (brief, standard, detailed) and type (report, literature review,
  comparison): plan size and wording, statements per section, a comparison's table, a review's sources per theme;
* ``export`` — a finished report as Markdown, HTML, PDF or DOCX;
* ``budget`` — the run's shared deadline and token budget;
* ``persistence`` — where paused runs live (crewAI's ``FlowPersistence``, durable in the memory database);
* ``runner`` — ``DeepResearch``, the async API every door uses (``Runtime.deep_research()``).

Clarifying questions themselves are shared with quick answers (``researchcrew.pipeline.clarify``).
"""
