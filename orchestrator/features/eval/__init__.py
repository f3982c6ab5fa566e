"""``sqlgate eval``: a file of the user's questions with gold SQL (or rows), measured.

- ``cases``      the eval file (JSON, JSONL, YAML, or Spider's dev.json) as ``EvalCase``s
- ``compare``    execution accuracy: result sets as multisets (in order when the gold orders)
- ``runner``     each question through the pipeline, approved by ``--approve-all``, scored
- ``report``     the report per question and in total, and its comparison with a baseline
- ``cassettes``  the model's traffic recorded (VCR.py) and replayed (no network) per question
- ``replay``     an eval from recordings alone, for Python and the pytest plugin
- ``pytest_plugin``  the ``sqlgate_replay`` fixture (entry point ``pytest11``)

Nothing is imported here: pytest loads the plugin in every run, so it must cost nothing.
"""
