// researchcrew web page: the Library — upload documents into the knowledge base (with upload progress), see each
// one's status while it is ingested (queued, ingesting n of m, ready with its chunks, failed with the reason), and
// delete them.
//
// Same rules as app.js: text from the service goes into the page as text. The API: POST /v1/documents (multipart,
// sent with XMLHttpRequest for its upload progress), GET /v1/documents (polled while something is being ingested),
// DELETE /v1/documents/{id}. Documents go to the user's private collection ("My documents"); the composer's
// Collections toggles (app.js) choose which collections a question searches.
"use strict";

(() => {
  const rc = window.researchcrew;
  const { $, el } = rc;
  const STATUS_LABELS = { queued: "Queued", ingesting: "Ingesting", ready: "Ready", failed: "Failed" };
  const POLL_MS = 1000;
  let polling = null;

  function size(bytes) {
    if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
    if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
    return `${bytes} B`;
  }

  function statusText(doc) {
    if (doc.status === "ingesting" && doc.progress && doc.progress.total) {
      return `Ingesting ${doc.progress.done} of ${doc.progress.total}`;
    }
    if (doc.status === "ready") return `Ready · ${doc.chunks} passage${doc.chunks === 1 ? "" : "s"}`;
    return STATUS_LABELS[doc.status] || doc.status;
  }

  function render(listing) {
    const list = $("documents");
    list.replaceChildren();
    $("documents-state").textContent = listing.total ? `${listing.total} document${listing.total === 1 ? "" : "s"}` : "No documents yet: upload PDF, HTML, Markdown, text or JSONL files.";
    for (const doc of listing.documents) {
      const item = el("li", "document");
      item.dataset.status = doc.status;
      item.dataset.documentId = doc.id;
      const about = el("div", "document-about");
      about.append(
        el("span", "document-name", doc.filename),
        el("span", "document-meta", [size(doc.size_bytes), doc.format, doc.source_url].filter(Boolean).join(" · ")),
      );
      const status = el("span", `document-status status-${doc.status}`, statusText(doc));
      if (doc.error) status.title = doc.error;
      about.append(status);
      if (doc.error) about.append(el("span", "document-error", doc.error));
      item.append(about);
      if (doc.may_change) {
        // Only its uploader or the collection's owner may delete it; a member reading a shared collection sees
        // no button that would only answer 403.
        const remove = el("button", "document-delete", "Delete");
        remove.type = "button";
        remove.setAttribute("aria-label", `Delete ${doc.filename}`);
        remove.addEventListener("click", () => removeDocument(doc));
        item.append(remove);
      } else {
        about.append(el("span", "document-meta", `added by ${doc.owner}`));
      }
      list.append(item);
    }
    const busy = listing.documents.some((doc) => doc.status === "queued" || doc.status === "ingesting");
    if (busy && !polling && !$("library").hidden) polling = setTimeout(poll, POLL_MS);
  }

  async function refresh() {
    try {
      render(await rc.api("GET", "/v1/documents?limit=200"));
    } catch (error) {
      $("documents-state").textContent = error.message;
    }
  }

  async function poll() {
    polling = null;
    await refresh();
  }

  async function removeDocument(doc) {
    if (!window.confirm(`Delete “${doc.filename}” and its passages from the knowledge base?`)) return;
    try {
      await rc.api("DELETE", `/v1/documents/${encodeURIComponent(doc.id)}`);
    } catch (error) {
      rc.showBanner(error.message);
    }
    await refresh();
  }

  function send(files, onProgress) {
    const form = new FormData();
    for (const file of files) form.append("file", file, file.name);
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open("POST", "/v1/documents");
      for (const [name, value] of Object.entries(rc.headers({}))) request.setRequestHeader(name, value);
      request.upload.addEventListener("progress", (event) => {
        if (event.lengthComputable) onProgress(event.loaded / event.total);
      });
      request.addEventListener("load", () => {
        let body = null;
        try {
          body = JSON.parse(request.responseText);
        } catch {
          body = null;
        }
        if (request.status === 202) resolve(body);
        else reject(new rc.ApiError(request.status, (body && body.detail) || `The upload failed (HTTP ${request.status}).`));
      });
      request.addEventListener("error", () => reject(new rc.ApiError(0, "Cannot reach the researchcrew service.")));
      request.send(form);
    });
  }

  $("upload-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("upload-files");
    const files = Array.from(input.files || []);
    if (!files.length) return;
    const bar = $("upload-progress");
    const message = $("upload-message");
    bar.value = 0;
    bar.hidden = false;
    message.className = "muted small";
    message.textContent = `Uploading ${files.length} file${files.length === 1 ? "" : "s"}…`;
    $("upload-submit").disabled = true;
    try {
      const accepted = await send(files, (fraction) => {
        bar.value = fraction;
      });
      bar.value = 1;
      message.textContent = `Uploaded: ${accepted.documents.map((doc) => doc.filename).join(", ")}. Ingesting in the background…`;
      input.value = "";
    } catch (error) {
      message.className = "error";
      message.textContent = error.message;
    } finally {
      bar.hidden = true;
      $("upload-submit").disabled = false;
      await refresh();
    }
  });

  function openLibrary() {
    for (const id of ["thread", "composer", "passage"]) $(id).hidden = true;
    $("library").hidden = false;
    $("open-library").classList.add("current");
    refresh();
  }

  function closeLibrary() {
    if ($("library").hidden) return;
    $("library").hidden = true;
    $("open-library").classList.remove("current");
    for (const id of ["thread", "composer"]) $(id).hidden = false;
  }

  $("open-library").addEventListener("click", openLibrary);
  $("close-library").addEventListener("click", closeLibrary);
  $("sessions").addEventListener("click", closeLibrary, true);
  $("new-session").addEventListener("click", closeLibrary, true);
  $("forget-key").addEventListener("click", () => {
    $("library").hidden = true;
  });
})();
