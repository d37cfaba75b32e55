// researchcrew web page: sessions, questions streamed as server-sent events, cited answers.
//
// Safety: everything that came from the service (and so from sources: web pages, papers, earlier answers) is put
// into the page as text (textContent, DOM nodes), never as HTML, except the answer's Markdown, which markdown-it
// renders with raw HTML off and images off, and whose links are kept only when they are http(s). The page's
// Content-Security-Policy allows no inline script, as a second line of defence.
"use strict";

(() => {
  const KEY_STORAGE = "researchcrew.apiKey";
  const SOURCE_NAMES = { rag: "Knowledge base", web: "Web", arxiv: "arXiv", memory: "Memory" };
  const KIND_LABELS = {
    generated: "Written by the language model",
    extractive: "Extractive: quoted from sources",
    uncertainty: "Not enough evidence",
    refusal: "Not answered",
  };
  const STAGE_LABELS = {
    guard: "Checking the question…",
    rewrite: "Reading the question in its conversation…",
    retrieve: "Searching the sources…",
    evaluate: "Weighing the evidence…",
    confidence: "Judging how strong the evidence is…",
    reformulate: "The evidence was weak: rephrasing the search…",
    synthesize: "Writing the answer…",
    validate: "Checking every citation…",
    remember: "Filing the answer in the session…",
    respond: "Finishing…",
  };

  const $ = (id) => document.getElementById(id);
  const state = {
    key: localStorage.getItem(KEY_STORAGE) || "",
    authOff: false,
    sessions: [],
    current: null,
    sources: [],
    running: null, // AbortController of the question being researched
    answered: new Map(), // session id -> answers seen here (memory files an answer just after it is sent)
  };

  // ---- small DOM helpers: text only ------------------------------------------------------------------------
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function safeHref(url) {
    if (typeof url !== "string") return null;
    try {
      const parsed = new URL(url, window.location.href);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
    } catch {
      return null;
    }
  }

  function sourceName(type) {
    return SOURCE_NAMES[type] || type;
  }

  function when(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return "";
    const seconds = (Date.now() - date.getTime()) / 1000;
    if (seconds < 60) return "just now";
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return date.toLocaleDateString();
  }

  function millis(ms) {
    return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
  }

  // ---- the API ---------------------------------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, message, retryAfter) {
      super(message);
      this.status = status;
      this.retryAfter = retryAfter;
    }
  }

  function headers(extra) {
    const result = { ...extra };
    if (state.key) result.Authorization = `Bearer ${state.key}`;
    return result;
  }

  async function failure(response) {
    let detail = "";
    try {
      const body = await response.json();
      detail = body.detail || (body.error && body.error.message) || "";
    } catch {
      detail = "";
    }
    const retryAfter = response.headers.get("Retry-After");
    return new ApiError(response.status, explain(response.status, detail, retryAfter), retryAfter);
  }

  function explain(status, detail, retryAfter) {
    if (status === 401) return detail || "The API key was not accepted.";
    if (status === 429) return `${detail || "Too many requests."}${retryAfter && !detail ? ` Retry in ${retryAfter} s.` : ""}`;
    if (status === 413) return detail || "The question is too long for the service.";
    if (status === 503) return detail || "The service is starting or stopping, or a store is unreachable; retry shortly.";
    if (status >= 500) return detail || `The service failed (HTTP ${status}).`;
    return detail || `The request failed (HTTP ${status}).`;
  }

  async function api(method, path, body) {
    let response;
    try {
      response = await fetch(path, {
        method,
        headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError(0, "Cannot reach the researchcrew service. Is `researchcrew serve` still running?");
    }
    if (!response.ok) throw await failure(response);
    return response.status === 204 ? null : response.json();
  }

  // ---- key and start-up -------------------------------------------------------------------------------------
  function showBanner(message) {
    $("banner").textContent = message;
    $("banner").hidden = !message;
  }

  function showKeyPanel(message) {
    $("key-panel").hidden = false;
    for (const id of ["sidebar", "thread", "composer", "account", "passage"]) $(id).hidden = true;
    $("key-error").textContent = message || "";
    $("key-error").hidden = !message;
    $("key-input").focus();
  }

  function showApp() {
    $("key-panel").hidden = true;
    for (const id of ["sidebar", "thread", "composer", "account"]) $(id).hidden = false;
    $("key-badge").textContent = state.authOff ? "local mode: no key needed" : `key ${state.key.split("_").slice(0, 2).join("_")}…`;
    $("forget-key").hidden = state.authOff;
    $("question").focus();
  }

  async function start() {
    showBanner("");
    try {
      const listing = await api("GET", "/v1/sessions");
      state.authOff = !state.key;
      showApp();
      renderSessions(listing.sessions);
      loadSources();
      const wanted = new URLSearchParams(window.location.hash.slice(1)).get("session");
      if (wanted && listing.sessions.some((s) => s.session_id === wanted)) await openSession(wanted);
    } catch (error) {
      if (error.status === 401) {
        showKeyPanel(state.key ? `The saved key was not accepted: ${error.message}` : "");
      } else {
        showBanner(error.message);
        if (!state.key) showKeyPanel("");
      }
    }
  }

  $("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("key-input").value.trim();
    if (!key) return;
    $("key-submit").disabled = true;
    $("key-submit").textContent = "Checking…";
    state.key = key;
    try {
      const listing = await api("GET", "/v1/sessions");
      localStorage.setItem(KEY_STORAGE, key);
      $("key-input").value = "";
      state.authOff = false;
      showBanner("");
      showApp();
      renderSessions(listing.sessions);
      loadSources();
    } catch (error) {
      state.key = localStorage.getItem(KEY_STORAGE) || "";
      $("key-error").textContent = error.message;
      $("key-error").hidden = false;
    } finally {
      $("key-submit").disabled = false;
      $("key-submit").textContent = "Use key";
    }
  });

  $("forget-key").addEventListener("click", () => {
    if (state.running) state.running.abort();
    localStorage.removeItem(KEY_STORAGE);
    state.key = "";
    state.current = null;
    state.sessions = [];
    $("sessions").replaceChildren();
    clearThread();
    history.replaceState(null, "", window.location.pathname);
    showKeyPanel("The key was removed from this browser.");
  });

  async function loadSources() {
    try {
      const response = await fetch("/readyz");
      const readiness = await response.json();
      state.sources = Array.isArray(readiness.sources) ? readiness.sources : [];
    } catch {
      state.sources = [];
    }
    const box = $("source-toggles");
    box.replaceChildren(el("legend", null, "Sources"));
    for (const type of state.sources) {
      const label = el("label", "toggle");
      const input = el("input");
      input.type = "checkbox";
      input.checked = true;
      input.value = type;
      label.append(input, ` ${sourceName(type)}`);
      box.append(label);
    }
    box.hidden = state.sources.length === 0;
    loadCollections();
  }

  // The knowledge-base collections this user reads (shared, their private one, named ones they belong to): each a
  // toggle; unticking one narrows the knowledge-base search to the others (the service's filter can only narrow
  // what the user may read, never widen it).
  async function loadCollections() {
    const box = $("collection-toggles");
    let collections = [];
    try {
      collections = (await api("GET", "/v1/collections")).collections || [];
    } catch {
      collections = [];
    }
    box.replaceChildren(el("legend", null, "Collections"));
    for (const collection of collections) {
      const label = el("label", "toggle");
      const input = el("input");
      input.type = "checkbox";
      input.checked = true;
      input.value = collection.name;
      const name = collection.kind === "private" ? "My documents" : collection.name;
      label.append(input, ` ${name}`);
      box.append(label);
    }
    box.hidden = collections.length < 2;
  }

  // ---- sessions ---------------------------------------------------------------------------------------------
  function renderSessions(sessions) {
    state.sessions = sessions;
    const list = $("sessions");
    list.replaceChildren();
    $("sessions-state").textContent = sessions.length ? "" : "No sessions yet: ask a question to start one.";
    $("sessions-state").hidden = sessions.length > 0;
    for (const session of sessions) {
      session.exchanges = Math.max(session.exchanges, state.answered.get(session.session_id) || 0);
      const item = el("li");
      item.dataset.sessionId = session.session_id;
      if (session.session_id === state.current) item.classList.add("current");
      const open = el("button", "session-open");
      open.type = "button";
      open.append(
        el("span", "session-title", session.title || "Untitled session"),
        el("span", "session-meta", `${session.exchanges} answer${session.exchanges === 1 ? "" : "s"} · ${when(session.updated_at)}`),
      );
      open.addEventListener("click", () => openSession(session.session_id));
      const remove = el("button", "session-delete", "🗑");
      remove.type = "button";
      remove.title = "Delete this session";
      remove.setAttribute("aria-label", `Delete the session “${session.title || "Untitled session"}”`);
      remove.addEventListener("click", () => deleteSession(session));
      item.append(open, remove);
      list.append(item);
    }
  }

  async function refreshSessions() {
    try {
      renderSessions((await api("GET", "/v1/sessions")).sessions);
    } catch (error) {
      $("sessions-state").textContent = `Could not load the sessions: ${error.message}`;
      $("sessions-state").hidden = false;
    }
  }

  function clearThread() {
    const thread = $("thread");
    thread.replaceChildren($("empty-thread") || el("div"));
    $("empty-thread").hidden = false;
    closePassage();
  }

  async function openSession(sessionId) {
    if (state.running) return;
    state.current = sessionId;
    history.replaceState(null, "", `#session=${encodeURIComponent(sessionId)}`);
    renderSessions(state.sessions);
    clearThread();
    $("empty-thread").hidden = true;
    const loading = el("p", "muted", "Loading the session…");
    $("thread").append(loading);
    try {
      const detail = await api("GET", `/v1/sessions/${encodeURIComponent(sessionId)}`);
      loading.remove();
      if (!detail.exchanges.length) $("empty-thread").hidden = false;
      for (const exchange of detail.exchanges) {
        const view = exchangeView(exchange.question);
        view.finish(exchange);
      }
      scrollToEnd();
    } catch (error) {
      loading.textContent = `Could not open the session: ${error.message}`;
      loading.className = "failure";
    }
    $("question").focus();
  }

  async function newSession() {
    const session = await api("POST", "/v1/sessions", {});
    state.current = session.session_id;
    history.replaceState(null, "", `#session=${encodeURIComponent(session.session_id)}`);
    await refreshSessions();
    return session.session_id;
  }

  $("new-session").addEventListener("click", async () => {
    if (state.running) return;
    try {
      await newSession();
      clearThread();
      $("question").focus();
    } catch (error) {
      showBanner(error.message);
    }
  });

  async function deleteSession(session) {
    if (state.running) return;
    if (!window.confirm(`Delete the session “${session.title || "Untitled session"}” and its answers?`)) return;
    try {
      await api("DELETE", `/v1/sessions/${encodeURIComponent(session.session_id)}`);
      if (state.current === session.session_id) {
        state.current = null;
        history.replaceState(null, "", window.location.pathname);
        clearThread();
      }
      await refreshSessions();
    } catch (error) {
      showBanner(`Could not delete the session: ${error.message}`);
    }
  }

  // ---- one exchange: question, live sources, answer, citations ----------------------------------------------
  function scrollToEnd() {
    const thread = $("thread");
    thread.scrollTop = thread.scrollHeight;
  }

  function exchangeView(question) {
    $("empty-thread").hidden = true;
    const root = el("article", "exchange");
    const card = el("div", "card");
    const stage = el("div", "stage");
    const sourcesTitle = el("h3", "sources-title", "Sources searched");
    const sources = el("ul", "sources");
    const body = el("div", "answer-body");
    root.append(el("div", "question", question), card);
    card.append(stage, sourcesTitle, sources, body);
    $("thread").append(root);
    const rows = new Map();
    let draft = null;
    let draftText = "";

    function sourceRow(type) {
      let row = rows.get(type);
      if (!row) {
        row = el("li", "source");
        row.dataset.source = type;
        row.append(el("span", "mark"), el("span", "name", sourceName(type)), el("span", "detail"));
        rows.set(type, row);
        sources.append(row);
      }
      return row;
    }

    function setSource(report) {
      const row = sourceRow(report.source_type);
      row.dataset.state = report.status;
      const [mark, , detail] = row.children;
      const took = report.latency_ms ? ` · ${millis(report.latency_ms)}` : "";
      if (report.status === "success") {
        mark.textContent = "✓";
        detail.textContent = `${report.chunk_count} passage${report.chunk_count === 1 ? "" : "s"}${took}`;
      } else if (report.status === "empty") {
        mark.textContent = "·";
        detail.textContent = `nothing found${took}`;
      } else if (report.status === "skipped") {
        mark.textContent = "–";
        detail.textContent = "not searched for this question";
      } else {
        mark.textContent = "✗";
        const failure = report.failure || {};
        const kind = (failure.kind || "failed").replaceAll("_", " ");
        detail.textContent = `failed (${kind}): ${failure.message || "no reason given"}`;
      }
    }

    return {
      root,
      running(pendingSources) {
        stage.replaceChildren(el("span", "spinner"), el("span", null, "Starting…"));
        for (const type of pendingSources) {
          const row = sourceRow(type);
          row.dataset.state = "pending";
          row.children[0].textContent = "…";
          row.children[2].textContent = "searching";
        }
      },
      stage(event) {
        if (event.status !== "started") return;
        const label = STAGE_LABELS[event.stage];
        if (label) stage.replaceChildren(el("span", "spinner"), el("span", null, label));
      },
      source(event) {
        setSource(event.source);
      },
      text(event) {
        if (event.detail && event.detail.reset) draftText = "";
        draftText += event.text;
        if (!draft) {
          draft = el("div", "answer markdown draft");
          body.append(draft);
        }
        renderMarkdown(draft, draftText, []);
        scrollToEnd();
      },
      finish(answer) {
        stage.replaceChildren();
        stage.hidden = true;
        if (draft) draft.remove();
        for (const report of answer.source_reports || []) setSource(report);
        sourcesTitle.hidden = rows.size === 0;
        body.replaceChildren(answerView(answer, root));
      },
      fail(message) {
        stage.replaceChildren();
        stage.hidden = true;
        for (const row of rows.values()) {
          if (row.dataset.state === "pending") {
            row.dataset.state = "skipped";
            row.children[0].textContent = "–";
            row.children[2].textContent = "stopped";
          }
        }
        body.append(el("p", "failure", message));
      },
    };
  }

  function answerView(answer, exchangeRoot) {
    const wrapper = el("div");
    const badges = el("div", "badges");
    const kind = answer.answer_kind || "generated";
    badges.append(el("span", `badge ${kind}`, KIND_LABELS[kind] || kind));
    if (answer.confidence_level) {
      badges.append(el("span", `badge ${answer.confidence_level}`, `Confidence: ${answer.confidence_level}`));
    } else if (typeof answer.confidence === "number") {
      badges.append(el("span", "badge", `Confidence: ${Math.round(answer.confidence * 100)}%`));
    }
    if (answer.partial) badges.append(el("span", "badge partial", "Cut short by the time limit"));
    const text = el("div", "answer markdown");
    const citations = answer.citations || [];
    renderMarkdown(text, answer.answer || "", citations, exchangeRoot);
    wrapper.append(badges, text);
    if (answer.table && window.ResearchTables) {
      // A structured answer (issue 22): its rows as a sortable table with a CSV download, in place of the
      // Markdown table of the text (the text keeps the lead and the "more rows" line).
      const markdownTable = text.querySelector("table");
      if (markdownTable) markdownTable.remove();
      wrapper.append(window.ResearchTables.view(answer, headers));
    }

    const caveats = (answer.caveats || []).filter((caveat) => caveat);
    if (caveats.length) {
      const box = el("div", "caveats");
      const list = el("ul");
      for (const caveat of caveats) list.append(el("li", null, caveat));
      box.append(list);
      wrapper.append(box);
    }
    if (citations.length) {
      wrapper.append(el("h3", "sources-title", "Cited"));
      const list = el("ol", "citations");
      for (const citation of citations) {
        const item = el("li");
        const button = el("button", "citation");
        button.type = "button";
        button.dataset.n = String(citation.number);
        // One source, one citation: the file name (or URL) a reader knows it by, and every cited passage's place.
        const label = citation.label && citation.label !== citation.title ? citation.label : null;
        const where = [label, citation.location, sourceName(citation.source_type)].filter(Boolean).join(" · ");
        button.append(
          el("span", "cite static", citation.number),
          el("span", "cite-title", citation.title || citation.label || citation.source_id || sourceName(citation.source_type)),
          el("span", "cite-where", where),
        );
        button.addEventListener("click", () => openPassage(citation, exchangeRoot));
        item.append(button);
        list.append(item);
      }
      wrapper.append(list);
    }
    return wrapper;
  }

  // ---- Markdown with citation markers ----------------------------------------------------------------------
  const markdown = window.markdownit({ html: false, linkify: false, typographer: false });
  markdown.disable(["image"]); // a source's Markdown image must not make the browser fetch anything
  const defaultLinkOpen = markdown.renderer.rules.link_open || ((tokens, idx, options, env, self) => self.renderToken(tokens, idx, options));
  markdown.renderer.rules.link_open = (tokens, idx, options, env, self) => {
    tokens[idx].attrSet("target", "_blank");
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
    return defaultLinkOpen(tokens, idx, options, env, self);
  };

  function renderMarkdown(container, source, citations, exchangeRoot) {
    container.innerHTML = markdown.render(source); // raw HTML off: markdown-it escapes every tag in the text
    for (const link of container.querySelectorAll("a")) {
      const href = safeHref(link.getAttribute("href"));
      if (href) link.setAttribute("href", href);
      else link.replaceWith(document.createTextNode(link.textContent));
    }
    const byNumber = new Map(citations.map((citation) => [citation.number, citation]));
    if (byNumber.size) linkMarkers(container, byNumber, exchangeRoot);
  }

  function linkMarkers(container, byNumber, exchangeRoot) {
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    const marker = /\[(\d+(?:\s*,\s*\d+)*)\]/g;
    for (const node of nodes) {
      const text = node.nodeValue;
      if (!marker.test(text)) continue;
      marker.lastIndex = 0;
      const fragment = document.createDocumentFragment();
      let last = 0;
      for (const match of text.matchAll(marker)) {
        const numbers = match[1].split(",").map((n) => Number(n.trim()));
        if (!numbers.every((n) => byNumber.has(n))) continue;
        fragment.append(text.slice(last, match.index));
        for (const n of numbers) {
          const button = el("button", "cite", n);
          button.type = "button";
          button.dataset.n = String(n);
          button.title = byNumber.get(n).title || `Source ${n}`;
          button.setAttribute("aria-label", `Source ${n}: ${button.title}`);
          button.addEventListener("click", () => openPassage(byNumber.get(n), exchangeRoot));
          fragment.append(button);
        }
        last = match.index + match[0].length;
      }
      fragment.append(text.slice(last));
      node.replaceWith(fragment);
    }
  }

  // ---- the passage panel -----------------------------------------------------------------------------------
  function openPassage(citation, exchangeRoot) {
    for (const open of document.querySelectorAll(".cite.open, .citation.open")) open.classList.remove("open");
    if (exchangeRoot) {
      for (const node of exchangeRoot.querySelectorAll(`[data-n="${citation.number}"]`)) node.classList.add("open");
    }
    $("passage-number").textContent = String(citation.number);
    $("passage-title").textContent = citation.title || citation.source_id || sourceName(citation.source_type);
    const authors = (citation.authors || []).slice(0, 4).join(", ") + ((citation.authors || []).length > 4 ? " et al." : "");
    const date = citation.source_date ? new Date(citation.source_date).getFullYear() : "";
    const file = citation.file_name && citation.file_name !== citation.title ? citation.file_name : null;
    $("passage-meta").textContent = [sourceName(citation.source_type), file, citation.location, authors, date].filter(Boolean).join(" · ");
    $("passage-text").textContent = citation.snippet || "(no passage text was kept for this source)";
    const href = safeHref(citation.url);
    const link = $("passage-link");
    if (href) {
      link.href = href;
      link.textContent = `Open the source ↗ ${new URL(href).hostname}`;
    } else {
      link.removeAttribute("href");
    }
    link.hidden = !href;
    $("passage-nolink").hidden = Boolean(href);
    $("passage").hidden = false;
    $("passage-close").focus();
  }

  function closePassage() {
    $("passage").hidden = true;
    for (const open of document.querySelectorAll(".cite.open, .citation.open")) open.classList.remove("open");
  }

  $("passage-close").addEventListener("click", closePassage);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("passage").hidden) closePassage();
  });

  // ---- asking: POST + server-sent events -------------------------------------------------------------------
  function questionOptions() {
    const body = {};
    const format = $("format").value;
    if (format) body.response = { response_format: format };
    const excluded = [...$("source-toggles").querySelectorAll("input[type=checkbox]")]
      .filter((input) => !input.checked)
      .map((input) => input.value);
    if (excluded.length) body.exclude_sources = excluded;
    const collections = [...$("collection-toggles").querySelectorAll("input[type=checkbox]")];
    const chosen = collections.filter((input) => input.checked).map((input) => input.value);
    if (collections.length && chosen.length < collections.length) {
      body.tool_options = { rag: { filters: { collections: chosen } } };
    }
    return body;
  }

  function setRunning(controller) {
    state.running = controller;
    $("ask").disabled = Boolean(controller);
    $("ask").textContent = controller ? "Researching…" : "Ask";
    $("stop").hidden = !controller;
    $("new-session").disabled = Boolean(controller);
  }

  async function ask(question) {
    showBanner("");
    if ($("deep-mode").checked && window.researchcrewDeep) return window.researchcrewDeep.ask(question);
    const options = questionOptions();
    const excluded = new Set(options.exclude_sources || []);
    if (state.sources.length && excluded.size === state.sources.length) {
      showBanner("Choose at least one source to search.");
      return;
    }
    let sessionId = state.current;
    const controller = new AbortController();
    setRunning(controller);
    const view = exchangeView(question);
    view.running(state.sources.filter((type) => !excluded.has(type)));
    scrollToEnd();
    try {
      if (!sessionId) sessionId = await newSession();
      let response;
      try {
        response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/messages`, {
          method: "POST",
          headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
          body: JSON.stringify({ question, ...options }),
          signal: controller.signal,
        });
      } catch (error) {
        if (error.name === "AbortError") throw error;
        throw new ApiError(0, "Cannot reach the researchcrew service. Is `researchcrew serve` still running?");
      }
      if (!response.ok) throw await failure(response);
      const answered = await readEvents(response, view);
      if (!answered) view.fail("The answer stopped before it was complete (the connection closed). Ask again.");
    } catch (error) {
      if (error.name === "AbortError") view.fail("Stopped. The question was cancelled.");
      else if (error.status === 401) {
        view.fail(error.message);
        showKeyPanel(`The key was not accepted: ${error.message}`);
      } else view.fail(error.message);
    } finally {
      setRunning(null);
      scrollToEnd();
      refreshSessions();
    }
  }

  async function readEvents(response, view) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let answered = false;
    let listed = false; // the session list is refreshed once the service has filed the question (its title)
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const message = parseEvent(block);
        if (!message) continue;
        if (!listed) {
          listed = true;
          refreshSessions();
        }
        if (message.event === "stage") view.stage(message.data);
        else if (message.event === "source") view.source(message.data);
        else if (message.event === "text") view.text(message.data);
        else if (message.event === "run" && window.researchcrewDeep) {
          // The message answered a deep run's clarifying questions: the run takes over this exchange.
          view.root.remove();
          window.researchcrewDeep.show(message.data);
          answered = true;
        } else if (message.event === "response") {
          view.finish(message.data);
          answered = true;
          countAnswer();
        } else if (message.event === "error") {
          view.fail(message.data.detail || "The question could not be answered.");
          answered = true;
        }
      }
    }
    return answered;
  }

  function countAnswer() {
    const session = state.sessions.find((s) => s.session_id === state.current);
    if (session) state.answered.set(session.session_id, session.exchanges + 1);
  }

  function parseEvent(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return null;
    try {
      return { event, data: JSON.parse(data.join("\n")) };
    } catch {
      return null;
    }
  }

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("question").value.trim();
    if (!question || state.running) return;
    $("question").value = "";
    ask(question);
  });

  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });

  $("stop").addEventListener("click", () => {
    if (state.running) state.running.abort();
  });

  // Shared with deep.js (deep research runs), which is loaded after this file.
  window.researchcrew = {
    $, el, state, api, headers, failure, ApiError, parseEvent, answerView, renderMarkdown, scrollToEnd,
    showBanner, setRunning, newSession, refreshSessions, questionOptions, showKeyPanel,
  };

  start();
})();
