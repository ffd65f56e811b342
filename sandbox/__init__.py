"""Where and how a candidate is judged: the harness, the sandboxes that run it, and the judge."""
