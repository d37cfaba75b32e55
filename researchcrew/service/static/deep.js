// researchcrew web page: deep research runs — clarifying questions, a plan to edit and approve, progress per
// sub-question, and the report with its sections, citations and quality scores.
//
// Same rules as app.js: text from the service goes into the page as text (DOM nodes), the report's Markdown through
// app.js's renderMarkdown (raw HTML off). The API: POST /v1/sessions/{id}/messages with mode "deep", then
// /v1/deep-runs/{id}/clarification, /plan and /cancel, each read as server-sent events (phase, stage, source, text,
// then run, then done). A completed run's report downloads from /v1/deep-runs/{id}/report?format=md|html|pdf|docx.
"use strict";

(() => {
  const rc = window.researchcrew;
  const { $, el } = rc;
  const PHASE_LABELS = {
    clarify: "Looking at what the sources hold…",
    plan: "Writing a research plan…",
    research: "Researching the sub-questions…",
    references: "Following references…",
    report: "Writing the report…",
    quality: "Checking the report's quality…",
    respond: "Finishing…",
  };
  const QUALITY_LABELS = {
    citation_correctness: "Citations correct",
    plan_coverage: "Plan covered",
    query_relevance: "On the question",
    structure: "Structure",
    soundness: "No flaws found",
    overall: "Overall",
  };

  function percent(value) {
    return `${Math.round((value || 0) * 100)}%`;
  }

  function button(label, className, onClick) {
    const node = el("button", className, label);
    node.type = "button";
    node.addEventListener("click", onClick);
    return node;
  }

  // ---- one deep run in the thread ----------------------------------------------------------------------------
  function runView(question) {
    $("empty-thread").hidden = true;
    const root = el("article", "exchange deep-run");
    const card = el("div", "card");
    const status = el("div", "stage");
    const progress = el("ol", "deep-progress");
    const body = el("div", "deep-body");
    root.append(el("div", "question", question), card);
    card.append(el("div", "badges", null), status, progress, body);
    card.firstChild.append(el("span", "badge deep", "Deep research"));
    $("thread").append(root);
    const rows = new Map();

    function row(number, text) {
      let item = rows.get(number);
      if (!item) {
        item = el("li", "deep-sub");
        item.dataset.subQuestion = String(number);
        item.append(el("span", "mark", "…"), el("span", "name", text || `Sub-question ${number}`), el("span", "detail"));
        rows.set(number, item);
        progress.append(item);
      }
      if (text) item.children[1].textContent = text;
      return item;
    }

    function busy(label) {
      status.hidden = false;
      status.replaceChildren(el("span", "spinner"), el("span", null, label));
    }

    return {
      root,
      busy,
      event(name, event) {
        if (name === "phase") {
          if (event.status === "started" && PHASE_LABELS[event.phase]) busy(PHASE_LABELS[event.phase]);
          if (event.phase === "research" && event.sub_question) {
            const item = row(event.sub_question, event.detail && event.detail.question);
            if (event.status === "started") {
              item.dataset.state = "running";
              item.children[2].textContent = "researching";
            } else if (event.status === "finished") {
              const outcome = (event.detail && event.detail.outcome) || "done";
              item.dataset.state = outcome;
              item.children[0].textContent = outcome === "answered" ? "✓" : "·";
              item.children[2].textContent = `${outcome} · ${event.detail.evidence || 0} passages`;
            }
          }
        } else if (event.sub_question && event.stage_event && name === "stage" && event.stage_event.status === "started") {
          row(event.sub_question).children[2].textContent = `${event.stage_event.stage}…`;
        }
        rc.scrollToEnd();
      },
      show(run) {
        status.hidden = true;
        root.dataset.runId = run.run_id;
        root.dataset.status = run.status;
        if (run.status === "awaiting_human_feedback" && run.awaiting === "clarification") {
          body.replaceChildren(clarificationView(run, this));
        } else if (run.status === "awaiting_human_feedback" && run.awaiting === "plan_approval") {
          body.replaceChildren(planView(run, this));
        } else if (run.status === "completed" && run.report) {
          body.replaceChildren(reportView(run.report, root));
        } else if (run.status === "running") {
          busy("The run is working in the service…");
        } else {
          const why = { cancelled: "The run was cancelled.", expired: "The run waited too long and expired: ask again." };
          body.replaceChildren(el("p", "failure", why[run.status] || `The run failed: ${run.error || "no reason given"}`));
        }
        rc.scrollToEnd();
      },
      fail(message) {
        status.hidden = true;
        body.append(el("p", "failure", message));
      },
    };
  }

  function clarificationView(run, view) {
    const box = el("div", "deep-clarify");
    const clarification = run.clarification || { questions: [] };
    box.append(el("h3", "sources-title", "A few questions first"));
    const list = el("ul", "deep-questions");
    for (const item of clarification.questions) {
      const entry = el("li", null, item.question);
      if (item.options && item.options.length) entry.append(el("span", "muted small", ` (${item.options.join(", ")})`));
      list.append(entry);
    }
    const answer = el("textarea", "deep-answer");
    answer.rows = 2;
    answer.maxLength = 2000;
    answer.placeholder = "Narrow the question: a sub-topic, a period, a kind of source…";
    answer.setAttribute("aria-label", "Your answer to the clarifying questions");
    const send = (body) => continueRun(run.run_id, "clarification", body, view);
    const actions = el("div", "deep-actions");
    actions.append(
      button("Answer", "primary", () => send({ answer: answer.value.trim() })),
      button("Just answer", "secondary", () => send({ just_answer: true })),
    );
    box.append(list, answer, actions);
    return box;
  }

  function planView(run, view) {
    const box = el("div", "deep-plan");
    const plan = run.plan || { items: [], max_items: 0 };
    box.append(el("h3", "sources-title", `The research plan (at most ${plan.max_items} sub-questions)`));
    if (plan.note) box.append(el("p", "deep-plan-note", plan.note));
    const list = el("ol", "deep-plan-items");
    const proposed = new Map(plan.items.map((item) => [item.id, item.question]));

    function entry(item) {
      const li = el("li", "deep-plan-item");
      li.dataset.id = String(item.id);
      const input = el("input");
      input.type = "text";
      input.value = item.question;
      input.maxLength = 500;
      input.setAttribute("aria-label", `Sub-question ${item.id}`);
      const up = button("↑", "icon-button", () => li.previousElementSibling && list.insertBefore(li, li.previousElementSibling));
      const down = button("↓", "icon-button", () => li.nextElementSibling && list.insertBefore(li.nextElementSibling, li));
      const remove = button("✕", "icon-button", () => li.remove());
      up.setAttribute("aria-label", "Move up");
      down.setAttribute("aria-label", "Move down");
      remove.setAttribute("aria-label", "Remove");
      li.append(input, up, down, remove);
      return li;
    }

    for (const item of plan.items) list.append(entry(item));
    const actions = el("div", "deep-actions");
    actions.append(
      button("Approve plan", "primary", () => {
        const items = [...list.children].map((li) => {
          const id = Number(li.dataset.id);
          const text = li.querySelector("input").value.trim();
          return text === proposed.get(id) ? { id } : { id, question: text };
        });
        continueRun(run.run_id, "plan", { action: "approve", items }, view);
      }),
      button("Cancel run", "secondary", () => continueRun(run.run_id, "cancel", undefined, view)),
    );
    box.append(list, actions);
    return box;
  }

  // ---- downloading the report (the key goes in a header, so the file is fetched, then saved from a blob) ----------
  const EXPORT_FORMATS = { md: "Markdown", html: "HTML", pdf: "PDF", docx: "Word (DOCX)" };

  function savedName(response, fallback) {
    const header = response.headers.get("Content-Disposition") || "";
    const match = /filename="([^"]+)"/.exec(header);
    return match ? match[1] : fallback;
  }

  async function download(runId, format, note) {
    note.textContent = "Preparing the download…";
    try {
      const response = await fetch(`/v1/deep-runs/${encodeURIComponent(runId)}/report?format=${format}`, {
        headers: rc.headers({}),
      });
      if (!response.ok) throw await rc.failure(response);
      const blob = await response.blob();
      const link = el("a", null);
      link.href = URL.createObjectURL(blob);
      link.download = savedName(response, `report.${format}`);
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
      note.textContent = `Downloaded ${link.download}`;
    } catch (error) {
      note.textContent = `The download failed: ${error.message}`;
    }
  }

  function downloadBar(report) {
    const bar = el("div", "deep-download");
    const label = el("label", null, "Download as ");
    const select = el("select", null);
    select.setAttribute("aria-label", "Report format");
    for (const [value, text] of Object.entries(EXPORT_FORMATS)) {
      const option = el("option", null, text);
      option.value = value;
      select.append(option);
    }
    select.value = "pdf";
    label.append(select);
    const note = el("span", "detail");
    note.setAttribute("role", "status");
    bar.append(label, button("Download report", "secondary", () => download(report.run_id, select.value, note)), note);
    return bar;
  }

  // A comparison's table (aspects × subjects) and a literature review's sources per theme, as text.
  function shapeViews(report) {
    const views = [];
    const titles = new Map((report.response.citations || []).map((c) => [c.number, c.title || c.label || ""]));
    const cited = (numbers) => (numbers || []).map((n) => `[${n}]`).join("");
    if (report.comparison && report.comparison.rows.length) {
      views.push(el("h3", "sources-title", "Comparison"));
      const table = el("table", "deep-comparison");
      const head = el("tr", null);
      for (const name of ["Aspect", ...report.comparison.subjects]) head.append(el("th", null, name));
      table.append(head);
      for (const row of report.comparison.rows) {
        const line = el("tr", null);
        line.append(el("td", null, row.aspect));
        row.cells.forEach((cell, index) => {
          line.append(el("td", null, cell ? `${cell} ${cited(row.citations[index])}` : "not found in the evidence"));
        });
        table.append(line);
      }
      views.push(table);
    }
    if ((report.themes || []).length) {
      views.push(el("h3", "sources-title", "Sources per theme"));
      const list = el("ul", "deep-themes");
      for (const theme of report.themes) {
        const item = el("li", null, theme.theme);
        const sources = theme.sources.map((n) => `[${n}] ${titles.get(n) || ""}`.trim()).join("; ");
        item.append(el("div", "detail", sources || "no source cited"));
        list.append(item);
      }
      views.push(list);
    }
    return views;
  }

  function reportView(report, root) {
    const wrapper = el("div", "deep-report");
    wrapper.append(downloadBar(report));
    wrapper.append(rc.answerView({ ...report.response, partial: report.partial }, root));
    wrapper.append(...shapeViews(report));
    // the score of the report shown: the retry's only when it replaced the first report
    const quality = report.remediated ? report.quality[report.quality.length - 1] : report.quality[0];
    if (quality) {
      wrapper.append(el("h3", "sources-title", "Quality"));
      const scores = el("ul", "deep-quality");
      for (const [key, label] of Object.entries(QUALITY_LABELS)) {
        const item = el("li", null);
        item.dataset.score = key;
        item.append(el("span", "name", label), el("span", "detail", percent(quality[key])));
        scores.append(item);
      }
      wrapper.append(scores);
    }
    const notes = [...(report.not_done || [])];
    if (notes.length) {
      const list = el("ul", "caveats");
      for (const note of notes) list.append(el("li", null, note));
      wrapper.append(list);
    }
    return wrapper;
  }

  // ---- talking to the service ---------------------------------------------------------------------------------
  async function stream(path, body, view, controller) {
    let response;
    try {
      response = await fetch(path, {
        method: "POST",
        headers: rc.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new rc.ApiError(0, "Cannot reach the researchcrew service. Is `researchcrew serve` still running?");
    }
    if (!response.ok) throw await rc.failure(response);
    if (!(response.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      view.show(await response.json()); // cancel answers with the run itself
      return true;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let finished = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const message = rc.parseEvent(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (!message) continue;
        if (message.event === "run") {
          view.show(message.data);
          finished = true;
        } else if (message.event === "error") {
          view.fail(message.data.detail || "The run failed.");
          finished = true;
        } else if (message.event !== "done") view.event(message.event, message.data);
      }
    }
    return finished;
  }

  async function guarded(view, work) {
    const controller = new AbortController();
    rc.setRunning(controller);
    try {
      if (!(await work(controller))) view.fail("The run stopped before it was complete (the connection closed).");
    } catch (error) {
      if (error.name === "AbortError") view.fail("Stopped. A resumed run goes back to its pause; look it up again.");
      else if (error.status === 401) rc.showKeyPanel(`The key was not accepted: ${error.message}`);
      else view.fail(error.message);
    } finally {
      rc.setRunning(null);
      rc.refreshSessions();
    }
  }

  function continueRun(runId, action, body, view) {
    if (rc.state.running) return;
    view.busy(action === "cancel" ? "Cancelling…" : "Resuming the run…");
    guarded(view, (controller) => stream(`/v1/deep-runs/${encodeURIComponent(runId)}/${action}`, body, view, controller));
  }

  async function ask(question) {
    const view = runView(question);
    view.busy("Starting…");
    rc.scrollToEnd();
    await guarded(view, async (controller) => {
      const sessionId = rc.state.current || (await rc.newSession());
      const deep = { length: $("deep-length").value, report_type: $("deep-type").value };
      const body = { question, ...rc.questionOptions(), mode: "deep", deep };
      return stream(`/v1/sessions/${encodeURIComponent(sessionId)}/messages`, body, view, controller);
    });
  }

  function show(run) {
    runView(run.question).show(run);
  }

  window.researchcrewDeep = { ask, show };
})();
