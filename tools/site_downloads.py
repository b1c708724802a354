"""Put the code into the built site, so that a reader of the rendered book can get what it describes.

    python tools/site_downloads.py [SITE]      # `make book` runs it on _build/html after the build

Writes SITE/downloads/, offline (nothing is fetched):
- transformer-source.tar.gz: `git archive` of the commit the book was built from, every tracked file under
  one folder transformer-COMMIT/ (`make test` and `make book` work in it once unpacked, as in a clone: the
  archive's file COMMIT names its commit, which git writes into it, and in a tree without git this script
  packs the tree itself);
- the package's wheel (`pip wheel . --no-deps`), which a `pip install` turns into `import transformer`;
- model.pt: the Multi30k model the book trained, which the wheel does not carry
  (`Translator.from_run("model.pt")`);
- SHA256SUMS: each file's SHA-256, in the format `sha256sum -c` reads, and the commit.
The links on "Getting the code" and the landing page point at these names.
"""
import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import file_checksum  # noqa: E402

SOURCE = "transformer-source.tar.gz"
MODEL = ROOT / "results" / "multi30k-cpu" / "model.pt"


# what a tree holds besides its source: outputs of builds, runs and tests, never packed
NOT_SOURCE = {".git", ".venv", "_build", "runs", "__pycache__", ".pytest_cache", ".ipynb_checkpoints",
              "mutants", ".whl", ".gl"}


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def tree_commit() -> tuple[str, bool]:
    """(the commit this tree is, whether it is a git checkout): a clone asks git; an unpacked source
    archive has no .git, and its COMMIT file, which `git archive` stamped, says it."""
    if (ROOT / ".git").exists():
        return git("rev-parse", "HEAD"), True
    stamped = (ROOT / "COMMIT").read_text(encoding="utf-8").strip() if (ROOT / "COMMIT").exists() else ""
    if len(stamped) != 40 or not all(c in "0123456789abcdef" for c in stamped):
        sys.exit("error: this tree is neither a git checkout nor an unpacked source archive (its COMMIT file "
                 "does not name a commit), so the commit of its code is unknown")
    return stamped, False


def pack_tree(dest: Path, prefix: str) -> None:
    """The tree's source as `git archive` would give it, for a tree without git: every file but the
    outputs (NOT_SOURCE, *.egg-info, *.mo) under one folder `prefix`."""
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts[1:]
        if any(p in NOT_SOURCE or p.endswith(".egg-info") for p in parts) or info.name.endswith(".mo"):
            return None
        return info
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(ROOT, arcname=prefix.rstrip("/"), filter=keep)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", nargs="?", default=str(ROOT / "_build" / "html"), help="the built site")
    args = parser.parse_args(argv)
    site = Path(args.site)
    if not (site / "index.html").is_file():
        sys.exit(f"error: {site} is not a built book (no index.html): run `make book` first")
    commit, checkout = tree_commit()
    out = site / "downloads"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if checkout:
        git("archive", "--format=tar.gz", f"--prefix=transformer-{commit[:12]}/", "-o", str(out / SOURCE),
            commit)
    else:
        pack_tree(out / SOURCE, f"transformer-{commit[:12]}/")
    with tempfile.TemporaryDirectory() as tmp:
        # the wheel from the archive's own files, so that both are the commit; the build backend is the
        # book environment's own (no download), and nothing is written into the repository
        shutil.unpack_archive(out / SOURCE, tmp)
        (tree,) = Path(tmp).iterdir()
        subprocess.run([sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "--no-build-isolation",
                        "-q", "-w", tmp], check=True)
        (wheel,) = Path(tmp).glob("transformer-*.whl")
        shutil.copy(wheel, out / wheel.name)
    shutil.copy(MODEL, out / MODEL.name)
    changed = git("status", "--porcelain", "--untracked-files=no") if checkout else ""
    lines = [f"{file_checksum(p)[1]}  {p.name}" for p in sorted(out.iterdir())]
    lines.append(f"# commit {commit}" + (" (the working tree had uncommitted changes, which neither the "
                                         "archive nor the wheel holds)" if changed else ""))
    (out / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    print(f"{out}: " + ", ".join(p.name for p in sorted(out.iterdir())))


if __name__ == "__main__":
    main()
