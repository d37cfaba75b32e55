"""Documents from URLs: fetched through the service's address policy, then read like an uploaded file.

The URL is checked and its host resolved by ``researchcrew.net.address_policy`` (public addresses only, unless
``documents.allow`` names the private hosts a deployment wants); the request goes to a vetted address with the
URL's own ``Host`` header and TLS server name, redirects are followed by hand (at most ``MAX_REDIRECTS``, each target
checked again), and the body is read through a ceiling of ``documents.max_file_bytes``. Every failure is a
``DocumentInputError`` naming the URL and the reason, so a request with one bad URL stores nothing.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import httpx

from researchcrew.errors import DocumentInputError, DocumentTooLargeError
from researchcrew.knowledge.intake import UploadedFile, safe_name
from researchcrew.knowledge.loaders import FORMATS
from researchcrew.net.address_policy import ALLOW_HINT, AddressPolicy, AddressRefused, ResolutionFailed
from researchcrew.settings import Settings

MAX_REDIRECTS = 3
HINT = "documents are fetched from public addresses only; a deployment allows others with RESEARCHCREW_DOCUMENTS__ALLOW"
# A response's content type -> the suffix its file is read as (when the URL's own name has no known suffix).
MEDIA_SUFFIXES = {
    "application/pdf": ".pdf",
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".txt",
    "application/x-ndjson": ".jsonl",
    "application/jsonl": ".jsonl",
}


def policy_for(settings: Settings) -> AddressPolicy:
    return AddressPolicy(settings.documents.allow, resolve_timeout_s=settings.webhooks.resolve_timeout_s)


def file_name_for(url: httpx.URL, media_type: str) -> str:
    """The URL's last path segment when it has a suffix a loader reads, else one made from the host and type."""
    name = safe_name(PurePosixPath(url.path).name, fallback="")
    if name and PurePosixPath(name).suffix.lower() in FORMATS:
        return name
    suffix = MEDIA_SUFFIXES.get(media_type, PurePosixPath(name).suffix.lower() or ".html")
    stem = PurePosixPath(name).stem if name else url.host
    return safe_name(f"{stem or 'document'}{suffix}")


async def fetch(url: str, settings: Settings, *, policy: AddressPolicy | None = None) -> UploadedFile:
    """The document at ``url`` as an uploaded file (see the module docstring)."""
    policy = policy or policy_for(settings)
    limit = settings.documents.max_file_bytes
    current = url
    async with httpx.AsyncClient(timeout=settings.documents.fetch_timeout_s, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                destination = await policy.resolve(current)
            except (AddressRefused, ResolutionFailed) as error:
                raise DocumentInputError(f"{url}: {str(error).replace(ALLOW_HINT, HINT)}") from None
            address = destination.addresses[0]
            headers = {"Host": destination.host_header, "Accept": ", ".join(MEDIA_SUFFIXES)}
            extensions = {"sni_hostname": destination.server_name} if destination.server_name else {}
            request = client.build_request("GET", destination.url_for(address), headers=headers, extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as error:
                raise DocumentInputError(f"{url}: could not be fetched ({type(error).__name__})") from None
            try:
                if response.is_redirect and "location" in response.headers:
                    current = str(destination.url.join(response.headers["location"]))
                    continue
                if response.status_code != 200:
                    raise DocumentInputError(f"{url}: the server answered HTTP {response.status_code}")
                content = await _read_capped(response, limit, url)
            finally:
                await response.aclose()
            media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            return UploadedFile(
                filename=file_name_for(destination.url, media_type), content=content, source_url=str(destination.url)
            )
    raise DocumentInputError(f"{url}: more than {MAX_REDIRECTS} redirects")


async def _read_capped(response: httpx.Response, limit: int, url: str) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise DocumentTooLargeError(f"{url} is {declared} bytes; the limit is {limit} bytes per file")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise DocumentTooLargeError(f"{url} sends more than {limit} bytes; the limit is {limit} bytes per file")
        chunks.append(chunk)
    return b"".join(chunks)
