"""The UI's view models: what the screens show, computed without Textual.

Nothing here imports textual (tests/ui/test_model_purity.py checks it), so each piece
is tested as plain Python and can be read without the widget tree in mind.
"""
