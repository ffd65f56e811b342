"""The chat client: LangChain's ChatOpenAI, keeping the reasoning text that OpenAI-compatible servers
return beside ``content`` (``reasoning_content`` from vLLM, SGLang, DeepSeek and Qwen; ``reasoning``
from others), which the base class drops. The trace keeps it; it is never sent back to the server.

Every reply it gives is whole text: a server may send a lone UTF-16 surrogate, escaped, and a string
holding one can be neither parsed as a kernel's source, nor written to the run's store, nor sent back
in the next request; each becomes U+FFFD, in the content, the tool calls (valid or not) and the
metadata."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from kernelevo.sandbox.wire import whole_characters

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
        for generation in result.generations:
            generation.message = whole_text(generation.message)
        return result


def whole_text(reply: AIMessage) -> AIMessage:
    """``reply`` with every lone surrogate in its strings replaced by U+FFFD."""
    return reply.model_copy(update={
        "content": whole_characters(reply.content),
        "tool_calls": [whole_characters(dict(call)) for call in reply.tool_calls],
        "invalid_tool_calls": [whole_characters(dict(call)) for call in reply.invalid_tool_calls],
        "additional_kwargs": whole_characters(reply.additional_kwargs or {}),
        "response_metadata": whole_characters(reply.response_metadata or {})})
