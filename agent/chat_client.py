"""The chat client: LangChain's ChatOpenAI, keeping the reasoning text that OpenAI-compatible servers
return beside ``content`` (``reasoning_content`` from vLLM, SGLang, DeepSeek and Qwen; ``reasoning``
from others), which the base class drops. The trace keeps it; it is never sent back to the server."""

from __future__ import annotations

from typing import Any

from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

REASONING_FIELDS = ("reasoning_content", "reasoning")


class ReasoningChatOpenAI(ChatOpenAI):
    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = response if isinstance(response, dict) else response.model_dump()
        for choice, generation in zip(raw.get("choices") or [], result.generations):
            message = choice.get("message") or {}
            text = next((message[k] for k in REASONING_FIELDS if isinstance(message.get(k), str) and message[k]), None)
            if text:
                generation.message.additional_kwargs["reasoning_content"] = text
        return result
