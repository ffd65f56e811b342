"""Reading a run back: its status and trace (``summary``) and the self-contained HTML page (``html``)."""
