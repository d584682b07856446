"""One module per rule group: the only code that reads the workflow's files, calls the core (theory, bandit, fit,
diagnose, grpo) and the views (figures, tables), and writes outputs atomically. The rules and ``pgrpo`` verbs call
the ``run_*`` functions here.
"""
