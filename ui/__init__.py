"""The web UI (Gradio): `ui.app.serve(settings)` and `ui.app.build_app(assistant, settings)`; `ui.render` makes
model output and paper records safe to show. Nothing is imported here, so `import ui` stays cheap."""
