"""OpenAI-compatible routes: ``POST /v1/chat/completions`` and ``GET /v1/models``, so that the official ``openai``
SDK and chat front-ends that speak its API (Open WebUI, LibreChat, ...) use researchcrew as a "model".

    from openai import OpenAI

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="rc_...")   # a key from `researchcrew users add`
    answer = client.chat.completions.create(
        model="researchcrew", messages=[{"role": "user", "content": "What is metamorphic testing?"}]
    )
    print(answer.choices[0].message.content)          # the cited answer and its numbered references
    print(answer.researchcrew["citations"])            # the same citations, structured (an extra field)

Modules: ``schema`` (request and response bodies), ``conversation`` (which session a conversation continues, which
message is the question), ``content`` (the answer as Markdown, usage, progress lines), ``errors`` (OpenAI's error
shape), ``routes`` (the router).
"""

from researchcrew.service.openai_compat._routes import MODELS, router

__all__ = ["MODELS", "router"]
