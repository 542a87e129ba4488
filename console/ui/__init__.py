"""The only Textual code: app, screens, widgets."""
