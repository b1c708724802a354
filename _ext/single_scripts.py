"""Every script once per page. sphinx-thebe and sphinx-togglebutton add their inline settings
(`const THEBE_JS_URL = ...`) once, yet every page listed each of them twice, once named None
and once '': the second declaration of the same constant is a SyntaxError in the browser's
console."""


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        # an inline script is named None once and '' the second time
        key = (str(script.filename or ""), tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    # in place: handlers after this one (MathJax's) add their scripts to this very list
    context["script_files"][:] = kept


def setup(app):
    # early: Sphinx stops calling this event's handlers at the first that returns a template
    app.connect("html-page-context", drop_repeated_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
