// Answer tables on the web page (issue 22): a structured answer's rows as a sortable table under the answer, with
// "Show all rows" (read from GET /v1/sessions/{id}/tables/{table_id}) and "Download CSV" (the same route with
// ?format=csv, fetched with the page's key and saved as a file). Every cell goes in as text (textContent).
(() => {
  "use strict";

  const MAX_ROWS = 1000; // "Show all rows" reads at most this many (the route's page limit); CSV has every row

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function cellText(value) {
    if (value === null || value === undefined) return "";
    return String(value);
  }

  function headerLabel(column) {
    return column.unit ? `${column.name} (${column.unit})` : column.name;
  }

  function compare(a, b, kind) {
    if (a === null || a === undefined || a === "") return b === null || b === undefined || b === "" ? 0 : 1;
    if (b === null || b === undefined || b === "") return -1;
    if (kind === "number" && typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), undefined, { numeric: true, sensitivity: "base" });
  }

  // view(answer, headers): the table block for an answer that has one; headers(extra) gives the auth headers.
  function view(answer, headers) {
    const table = answer.table;
    const sessionId = answer.query && answer.query.session_id;
    const block = el("section", "answer-table");
    block.dataset.tableId = table.table_id;
    if (table.title) block.append(el("h3", "answer-table-title", table.title));
    const status = el("p", "answer-table-status");
    const grid = el("table", "sortable");
    const head = el("thead");
    const body = el("tbody");
    grid.append(head, body);
    const columns = table.columns || [];
    const cited = (table.rows || []).some((row) => row.citation);
    let rows = (table.rows || []).slice();
    let offset = table.offset || 0;
    let sortBy = null;
    let descending = false;

    const headRow = el("tr");
    const labels = columns.map(headerLabel).concat(cited ? ["Source"] : []);
    labels.forEach((label, index) => {
      const th = el("th");
      const button = el("button", "sort", label);
      button.type = "button";
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", () => {
        descending = sortBy === index ? !descending : false;
        sortBy = index;
        for (const other of headRow.children) other.setAttribute("aria-sort", "none");
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        draw();
      });
      th.append(button);
      headRow.append(th);
    });
    head.append(headRow);

    function valueAt(row, index) {
      return index < columns.length ? row.values[index] : row.citation;
    }

    function draw() {
      let shown = rows.slice();
      if (sortBy !== null) {
        const kind = sortBy < columns.length ? columns[sortBy].kind : "number";
        shown.sort((a, b) => compare(valueAt(a, sortBy), valueAt(b, sortBy), kind));
        if (descending) shown.reverse();
      }
      body.replaceChildren(
        ...shown.map((row) => {
          const tr = el("tr");
          row.values.forEach((value, index) => {
            const td = el("td", columns[index] && columns[index].kind === "number" ? "number" : null, cellText(value));
            tr.append(td);
          });
          if (cited) tr.append(el("td", "cite-cell", row.citation ? `[${row.citation}]` : ""));
          return tr;
        }),
      );
      const more = table.total_rows - offset - rows.length;
      status.textContent = more > 0 ? `${rows.length} of ${table.total_rows} rows shown.` : `${table.total_rows} rows.`;
      showAll.hidden = more <= 0;
    }

    const actions = el("div", "answer-table-actions");
    const showAll = el("button", "secondary show-all", "Show all rows");
    showAll.type = "button";
    const download = el("button", "secondary download-csv", "Download CSV");
    download.type = "button";
    const problem = el("p", "answer-table-problem");
    problem.hidden = true;
    actions.append(showAll, download);

    function route(query) {
      return `/v1/sessions/${encodeURIComponent(sessionId)}/tables/${encodeURIComponent(table.table_id)}?${query}`;
    }

    function fail(message) {
      problem.textContent = message;
      problem.hidden = false;
    }

    showAll.addEventListener("click", async () => {
      showAll.disabled = true;
      try {
        const response = await fetch(route(`offset=0&limit=${MAX_ROWS}`), { headers: headers({}) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        const page = await response.json();
        rows = page.rows.map((row) => ({ ...row, citation: row.citation || null }));
        offset = page.offset;
        draw();
      } catch (error) {
        fail(`The other rows could not be read (${error.message}).`);
      } finally {
        showAll.disabled = false;
      }
    });

    download.addEventListener("click", async () => {
      download.disabled = true;
      try {
        const response = await fetch(route("format=csv"), { headers: headers({}) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        const url = URL.createObjectURL(await response.blob());
        const link = el("a");
        link.href = url;
        link.download = `table-${table.table_id}.csv`;
        document.body.append(link);
        link.click();
        link.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      } catch (error) {
        fail(`The CSV could not be downloaded (${error.message}).`);
      } finally {
        download.disabled = false;
      }
    });

    draw();
    block.append(grid, status, actions, problem);
    for (const note of table.notes || []) block.append(el("p", "answer-table-note", note));
    return block;
  }

  window.ResearchTables = { view };
})();
