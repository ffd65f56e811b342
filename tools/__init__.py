"""What the agent can do: typed tools over tasks/ and sandbox/ (the agent issue builds them)."""
