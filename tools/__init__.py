"""What the agent can do: LangChain tools with pydantic argument schemas over tasks/ and sandbox/.

Every verdict a tool reports comes from the harness; tools only write files, ask the harness, and
read back what it recorded."""

from kernelevo.tools.kernel_tools import ToolContext, make_tools, summarize_verdict

__all__ = ["ToolContext", "make_tools", "summarize_verdict"]
