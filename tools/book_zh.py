"""The Chinese edition of the book, from the same notebooks and stored outputs as the English one.

    python tools/book_zh.py html      # `make book` (after the English edition) and `make book-zh`:
                                      # builds it into _build/html/zh/
    python tools/book_zh.py gettext   # `make gettext`: refreshes the catalogues in locale/zh_CN/
    python tools/book_zh.py pot DIR   # only extracts the English strings, one template per page, into DIR

Sphinx replaces each paragraph, heading and table cell of the notebooks' markdown by its translation in
locale/zh_CN/LC_MESSAGES/<page>.po (one catalogue per page); what has no translation yet, or only a
fuzzy one, stays in English. `gettext` extracts the English strings and lets sphinx-intl merge them into
the catalogues: a new string arrives empty, a changed one keeps its old translation marked fuzzy (never
shown until someone checks it), and one that left the book leaves its catalogue (git keeps it).

The Chinese edition adds one page to the front matter, its glossary (locale/zh_CN/glossary.md).
"""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from babel.messages.pofile import read_po

from catalogues import CATALOGUES, OUTPUT_CATALOGUES, search_terms

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "_ext"))
from editions import EDITIONS, GLOSSARY  # noqa: E402
from outputs import templates_of  # noqa: E402

LANGUAGE = "zh_CN"
LOCALE = ROOT / "locale"
# Per page (not one catalogue for the book): a page's coverage is its own file's, and two people
# translating two chapters never edit the same file. No source line numbers: they would change every
# entry's comment whenever a cell above it grew.
CATALOGUE_SETTINGS = {"locale_dirs": [str(LOCALE)], "gettext_compact": False,
                      "gettext_location": False, "gettext_uuid": False}


def build(builder: str, out: Path, doctrees: Path, overrides: dict, toc: Path) -> None:
    from jupyter_book.sphinx import build_sphinx

    # what `jupyter-book build -W -n --keep-going` passes, plus the catalogues and the edition's settings
    settings = {"external_toc_path": toc.as_posix(), "nitpicky": True, "latex_individualpages": False,
                **CATALOGUE_SETTINGS, **overrides}
    result = build_sphinx(ROOT, out, use_external_toc=True, noconfig=True, path_config=ROOT / "_config.yml",
                          confoverrides=settings, doctreedir=doctrees, builder=builder, warningiserror=True,
                          keep_going=True)
    if result:
        sys.exit(f"error: the {builder} build failed (warnings count as failures); see the log above")


def edition_toc(folder: Path) -> Path:
    """The English table of contents with the glossary in front, and the parts' captions translated
    (the landing page's catalogue holds them; the toctree is added after Sphinx translates)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    landing = read_po((CATALOGUES / f"{toc['root']}.po").open("rb"))
    for part in toc["parts"]:
        message = landing.get(part["caption"])
        if message is not None and message.string and not message.fuzzy:
            part["caption"] = message.string
    toc["parts"].insert(0, {"caption": "术语", "chapters": [{"file": GLOSSARY}]})
    path = folder / f"_toc.{LANGUAGE}.yml"
    path.write_text(yaml.safe_dump(toc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def link_or_copy(source, target) -> None:
    try:
        Path(target).hardlink_to(source)
    except OSError:  # another file system
        shutil.copy2(source, target)


def search_words(folder: Path) -> Path:
    """The glossary's Chinese terms as a dictionary for the search index's word splitter (jieba), so
    that 束搜索 or 位置编码 is found as a whole as well as by its parts, and so is each term's other
    rendering (the glossary's column 又作: 层规范化, 集束搜索), which leads a reader to the glossary page."""
    path = folder / "search-words.txt"
    path.write_text("".join(f"{term} 1000 n\n" for term in search_terms()), encoding="utf-8")
    return path


def html(site: Path) -> Path:
    """Builds the edition beside the site, then puts it into the site's zh/ as hard links. Not built
    in place: myst-nb keeps its notebook outputs next to the output folder, which would be the site."""
    edition = site / EDITIONS[LANGUAGE]["folder"].strip("/")
    work = site.parent / f".{LANGUAGE}"
    work.mkdir(parents=True, exist_ok=True)
    build("html", work / "html", work / "doctrees",
          {"language": LANGUAGE, "html_search_options": {"dict": str(search_words(work))},
           **EDITIONS[LANGUAGE]["config"]}, edition_toc(work))
    shutil.rmtree(edition, ignore_errors=True)
    shutil.copytree(work / "html", edition, copy_function=link_or_copy)
    # the code, the wheel and the model are the same for both editions
    if (site / "downloads").is_dir():
        shutil.copytree(site / "downloads", edition / "downloads", copy_function=link_or_copy)
    return edition


def pot(templates: Path) -> None:
    # the folder is emptied first: refuse one that holds files but no templates (another's folder)
    if templates.is_dir() and any(templates.iterdir()) and not any(templates.rglob("*.pot")):
        sys.exit(f"error: {templates} holds files but no message templates: it is not a folder this "
                 "command made; choose an empty or new one")
    shutil.rmtree(templates, ignore_errors=True)
    shutil.rmtree(templates_of(templates), ignore_errors=True)
    build("gettext", templates, templates.parent / f".doctrees-{templates.name}", {}, ROOT / "_toc.yml")


def merge_outputs(templates: Path) -> None:
    """The cell outputs' messages (_ext/outputs.py) merged into locale/zh_CN/outputs/, as sphinx-intl
    merges the prose: a new message arrives empty, a changed one keeps its old translation marked
    fuzzy, one that left the outputs leaves its catalogue, and a page without messages has none."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    found = {path.relative_to(templates).with_suffix("").as_posix(): path
             for path in templates.rglob("*.pot")}
    for page, path in found.items():
        with path.open("rb") as f:
            template = read_po(f)
        target = OUTPUT_CATALOGUES / f"{page}.po"
        if not any(m.id for m in template):
            target.unlink(missing_ok=True)
            continue
        if target.exists():
            with target.open("rb") as f:
                catalogue = read_po(f)
        else:
            catalogue = Catalog(locale=LANGUAGE, project="outputs", fuzzy=False)
        catalogue.update(template)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as f:
            write_po(f, catalogue, width=0, ignore_obsolete=True, omit_header=True)
    for stale in OUTPUT_CATALOGUES.rglob("*.po"):
        if stale.relative_to(OUTPUT_CATALOGUES).with_suffix("").as_posix() not in found:
            stale.unlink()


def gettext(build_dir: Path) -> None:
    templates = build_dir / "gettext"
    pot(templates)
    merge_outputs(templates_of(templates))
    # sphinx-intl marks a changed string fuzzy; --no-obsolete drops a removed one
    subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "--pot-dir", str(templates),
                    "--locale-dir", str(LOCALE), "--language", LANGUAGE, "--line-width", "-1", "--no-obsolete"],
                   check=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["html", "gettext", "pot"])
    parser.add_argument("folder", nargs="?", help="pot: where the templates go")
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"),
                        help="the English site, whose zh/ folder receives the Chinese edition")
    args = parser.parse_args(argv)
    site = Path(args.site)
    if args.command == "html":
        print(f"the Chinese edition: {html(site)}")
    elif args.command == "pot":
        if not args.folder:
            parser.error("pot needs the folder for the templates")
        pot(Path(args.folder))
    else:
        gettext(site.parent)


if __name__ == "__main__":
    main()
