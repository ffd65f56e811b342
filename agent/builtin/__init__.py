"""The built-in policy: recognises op families by structure and searches Triton templates."""
