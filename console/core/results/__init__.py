"""Stored benchmark runs: the record, building it, importing files, comparing and exporting runs.

A StoredRun is vLLM's own result (the `--save-result` JSON object as written, or
the values of a printed result block for text imports) plus the console's
context: node, GPU model, partition modes, serve preset and flags, environment
(secrets masked), vLLM version, benchmark preset and argv, sweep position, and the
live series summary. Context the console cannot know (e.g. for an imported file)
is None, never guessed.

Pure: the store (files, ids on disk, imports of paths) is
console/services/results.py. The modules here, each importing only those above it:

    record        StoredRun, its JSON form (run_to_dict, run_from_dict), fingerprint, id
    build         runs from console results (run_from_console), result JSON, result blocks
    file_import   runs from file contents (runs_from_file)
    display       labels, formatted values, dates and summaries of runs
    compare       runs side by side (compare_table)
    export        JSON, CSV and Markdown exports
    reference     the seeds' published numbers (load_reference_numbers, reference_matches)
"""
